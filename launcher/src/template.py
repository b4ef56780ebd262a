# autotool template: imports the SDK once, then forks one confined tool per request.
# Run as `python -I -B -c <this> CONTROL_FD NATIVE_FD` by `autotool-launcher --template`.
# Single-threaded by construction: nothing here starts a thread, and a fork is refused when
# the process holds more than one.
import builtins
import ctypes
import gc
import json
import os
import random
import runpy
import signal
import socket
import struct
import sys

CONTROL = int(sys.argv[1])
NATIVE = int(sys.argv[2])

# PyDLL: the calls keep the GIL, so the process stays one thread the whole way through.
native = ctypes.PyDLL("/proc/self/fd/%d" % NATIVE)
os.close(NATIVE)
confine = native.autotool_confine
confine.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int]
confine.restype = ctypes.c_int
exec_info = native.autotool_exec_info
exec_info.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]
exec_info.restype = ctypes.c_ssize_t

# What nearly every tool imports; a module missing from the runtime is simply not preloaded.
for name in (
    "mcp.server.mcpserver",
    "mcp.server.mcpserver.exceptions",
    "httpx2",
    "pydantic",
    "anyio",
    "asyncio",
    "json",
    "typing",
    # What the SDK imports only once it serves: its event loop's backend and streams.
    "anyio._backends._asyncio",
    "anyio.abc._eventloop",
    "anyio.streams.stapled",
    "anyio.streams.tls",
    "pkgutil",
):
    try:
        __import__(name)
    except Exception:
        pass


def warm_sdk():
    """Build and drop a throwaway server with one tool, so the SDK's and pydantic's lazy
    caches (schema generation, type adapters) are filled here, in pages every child shares,
    rather than once per tool in pages each child dirties. It holds no key and no tool code,
    starts no thread and serves nothing."""
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("template")

    @server.tool()
    def probe(a: int, b: str = "") -> int:
        """A throwaway tool."""
        return a

    del server, probe


try:
    warm_sdk()
except Exception:
    pass

control = socket.socket(fileno=CONTROL)
children = {}


def reap(_signum=None, _frame=None):
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        answer = children.pop(pid, None)
        if answer is not None:
            try:
                answer.send(b"X" + struct.pack("<i", status))
            except OSError:
                pass
            answer.close()


def refuse(answer, fds, why):
    try:
        answer.send(b"E" + why.encode()[:1000])
    except OSError:
        pass
    for fd in fds:
        os.close(fd)


def run_tool(policy, fds, report, uses):
    """In the forked child: confine, then run the tool as __main__. Never returns.
    `report` and `uses` index `fds` (or are None); the uses channel goes to the descriptor
    the policy names, which its environment already says."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    control.detach()
    for target, fd in enumerate(fds[:3]):
        os.dup2(fd, target)
    report = fds[report] if report is not None else -1
    if uses is not None:
        want = uses[1]
        if report == want:
            report = os.dup(report)
        if fds[uses[0]] != want:
            os.dup2(fds[uses[0]], want)
        uses = want
    else:
        uses = -1
    buf = ctypes.create_string_buffer(1 << 20)
    n = exec_info(policy, len(policy), buf, len(buf))
    if n < 0:
        os._exit(125)
    info = json.loads(buf.raw[:n])
    del buf
    # Returns only in the confined tool; the outer waiter and the init exit inside.
    if confine(policy, len(policy), report, uses) != 0:
        os._exit(125)
    os.environ.clear()
    os.environ.update(dict(info["env"]))
    random.seed()
    argv = info["argv"][1:]
    while argv and argv[0] in ("-I", "-B"):
        argv = argv[1:]
    try:
        if argv and argv[0] == "-c":
            sys.argv = ["-c"] + argv[2:]
            code = compile(argv[1], "<string>", "exec")
            exec(code, {"__name__": "__main__", "__builtins__": builtins})
        else:
            sys.argv = argv
            runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as e:
        code = e.code
        if code is None:
            code = 0
        elif not isinstance(code, int):
            print(code, file=sys.stderr)
            code = 1
        sys.stdout.flush()
        os._exit(code)
    except BaseException:
        import traceback

        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def serve():
    while True:
        try:
            msg, fds, _flags, _addr = socket.recv_fds(control, 1 << 20, 7)
        except InterruptedError:
            continue
        if not msg:
            return
        if len(fds) < 4:
            for fd in fds:
                os.close(fd)
            continue
        answer = socket.socket(fileno=fds[3])
        # After stdio and the status socket: the report socket when the policy has egress,
        # then the uses channel when it has one (its number in the tool is the policy's).
        try:
            shape = json.loads(msg)
            report = 4 if shape.get("egress") is not None else None
            uses_fd = shape.get("uses_fd")
            uses = None
            if uses_fd is not None:
                uses = (4 + (report is not None), int(uses_fd))
            want = 4 + (report is not None) + (uses is not None)
        except (ValueError, TypeError, AttributeError):
            want = -1
        if len(fds) != want:
            refuse(answer, fds[:3] + fds[4:], "expected %d descriptors, got %d" % (want, len(fds)))
            answer.close()
            continue
        if len(os.listdir("/proc/self/task")) != 1:
            refuse(answer, fds[:3] + fds[4:], "the template is not single-threaded")
            answer.close()
            continue
        signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGCHLD])
        pid = os.fork()
        if pid == 0:
            answer.detach()
            run_tool(msg, fds, report, uses)
        for i, fd in enumerate(fds):
            if i != 3:
                os.close(fd)
        try:
            pidfd = os.pidfd_open(pid)
            socket.send_fds(answer, [b"P" + struct.pack("<i", pid)], [pidfd])
            os.close(pidfd)
        except OSError:
            pass
        children[pid] = answer
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGCHLD])


signal.signal(signal.SIGCHLD, reap)
gc.collect()
gc.freeze()
control.send(b"R")
serve()
