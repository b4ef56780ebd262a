# autotool template: imports the SDK once, then forks one confined tool per request.
# Run as `python -I -B -c <this> CONTROL_FD NATIVE_FD` by `autotool-launcher --template`.
# Single-threaded when it forks: the one worker thread warming the SDK uses is joined before
# serving, and a fork is refused when the process holds more than one thread.
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
confine.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]
confine.restype = ctypes.c_ssize_t

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
    """Build a throwaway server with one tool and serve it one short session (initialize, list,
    a call, a call with wrong arguments) through the SDK's own stdio transport over in-memory
    streams, then drop it. The SDK's and pydantic's lazy caches (schema generation, type
    adapters, message validation and serialisation) are then filled here, in pages every child
    shares, rather than once per tool in pages each child dirties. It holds no key and no tool
    code and reaches nothing; the streams are plain objects, not files. The SDK runs the sync
    function on anyio's worker thread: `one_thread` waits for it to end before any fork."""
    import logging

    import anyio
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("template")

    @server.tool()
    def probe(a: int, b: str = "") -> int:
        """A throwaway tool."""
        return a

    lowlevel = getattr(server, "_lowlevel_server", None)
    if lowlevel is None:
        return
    from mcp.server.stdio import stdio_server

    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "template", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
         "params": {"name": "probe", "arguments": {"a": 1, "b": "x"}}},
        {"jsonrpc": "2.0", "id": 4, "method": "tools/call",
         "params": {"name": "probe", "arguments": {"a": "not a number"}}},
    ]
    answers = 0
    # Made inside the loop: anyio's primitives belong to the loop that runs them.
    done = None

    class Out:
        async def write(self, text):
            nonlocal answers
            answers += text.count("\n")
            if answers >= 4:
                done.set()

        async def flush(self):
            pass

    class In:
        def __aiter__(self):
            return self.lines()

        async def lines(self):
            for request in requests:
                yield json.dumps(request) + "\n"
            # Keep the input open until every answer is out (or a bound passes).
            with anyio.move_on_after(5):
                await done.wait()

    async def session():
        nonlocal done
        done = anyio.Event()
        with anyio.fail_after(10):
            async with stdio_server(stdin=In(), stdout=Out()) as (read, write):
                await lowlevel.run(read, write, lowlevel.create_initialization_options())

    logging.disable(logging.CRITICAL)
    try:
        anyio.run(session)
    finally:
        logging.disable(logging.NOTSET)


def fresh_globals():
    """Put back what warming changed that a tool could see, so a forked tool starts as a fresh
    interpreter does: the root logger as Python leaves it (the SDK's `basicConfig` would
    otherwise be a no-op in the tool, and its own log level ignored), and asyncio's policy with
    no loop ever set (else `asyncio.get_event_loop()` at a tool's top level would fail)."""
    import asyncio
    import logging

    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
        handler.close()
    root.setLevel(logging.WARNING)
    asyncio.set_event_loop_policy(None)


def threads():
    """How many threads the process holds, as the kernel counts them."""
    return len(os.listdir("/proc/self/task"))


def one_thread(bound=10.0):
    """Wait for the worker threads warming used to end: the SDK runs a sync tool function on
    anyio's worker thread, which is told to stop when the session's loop closes but exits on
    its own time. True once the process has one thread again."""
    import threading
    import time

    deadline = time.monotonic() + bound
    for thread in threading.enumerate():
        if thread is not threading.main_thread():
            thread.join(max(0.0, deadline - time.monotonic()))
    # A joined thread may still be leaving the kernel's task list.
    while threads() != 1:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


try:
    warm_sdk()
except Exception:
    pass
fresh_globals()
if not one_thread():
    # A thread that outlived warming would make every fork unsafe.
    sys.stderr.write("autotool template: warming the SDK left a thread running\n")
    os._exit(3)

control = socket.socket(fileno=CONTROL)
children = {}
# Index of the policy descriptor among a request's (autotool_policy::fork::POLICY_INDEX).
POLICY = 4
# The module names a tool keeps (plain modules and builtins); the rest is the template's.
KEEP = {"__builtins__", "__name__", "__doc__", "__spec__", "__loader__", "__package__",
        "builtins", "gc", "json", "os", "random", "runpy", "signal", "socket", "struct", "sys"}


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


def run_tool(fds, report, uses):
    """In the forked child: confine, then run the tool as __main__. Never returns.
    `fds` are the request's descriptors (the policy at POLICY, never read here: the native
    confinement reads it, in this child); `report` and `uses` index `fds` (or are None); the
    uses channel goes to the descriptor the request names. Called from the module's top level
    once `serve` has returned in the child, so no frame above the tool's holds anything of the
    template's serving loop; the template's own names are dropped before the tool runs."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    # The template's sockets, and its siblings' status sockets, are closed by confinement; the
    # objects forget their numbers so nothing closes one the tool has reused.
    control.detach()
    for sibling in children.values():
        sibling.detach()
    children.clear()
    for target, fd in enumerate(fds[:3]):
        os.dup2(fd, target)
    policy = fds[POLICY]
    report = fds[report] if report is not None else -1
    if uses is not None:
        want = uses[1]
        if report == want:
            report = os.dup(report)
        if policy == want:
            policy = os.dup(policy)
        if fds[uses[0]] != want:
            os.dup2(fds[uses[0]], want)
        uses = want
    else:
        uses = -1
    buf = ctypes.create_string_buffer(1 << 20)
    # Returns only in the confined tool; the outer waiter and the init exit inside.
    n = confine(policy, report, uses, buf, len(buf))
    if n <= 0:
        os._exit(125)
    info = json.loads(buf.raw[:n])
    ctypes.memset(buf, 0, len(buf))
    os.environ.clear()
    os.environ.update(dict(info["env"]))
    random.seed()
    # What the interpreter was started with, as a launched tool's says (the process's own
    # command line stays the template's).
    sys.orig_argv = list(info["argv"])
    argv = info["argv"][1:]
    del buf, info, fds, policy, report, uses, n
    while argv and argv[0] in ("-I", "-B"):
        argv = argv[1:]
    # The template's names go: what the tool can reach walking up its frames is this frame
    # (its argv) and a module namespace of plain modules.
    done, keep, names = finish, KEEP, globals()
    for name in list(names):
        if name not in keep:
            del names[name]
    del keep, names
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
        done(code)
    except BaseException:
        import traceback

        traceback.print_exc()
        done(1)
    done(0)


def finish(code):
    """End the tool as an interpreter ends: wait for its non-daemon threads, run its `atexit`
    functions, flush stdio, then exit with `code`. The rest of finalisation is skipped: the
    template's objects are not the tool's to tear down."""
    try:
        import threading

        threading._shutdown()
    except BaseException:
        pass
    try:
        import atexit

        atexit._run_exitfuncs()
    except BaseException:
        pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass
    os._exit(code)


def serve():
    """Fork a tool per request. Returns in a forked child only, with what it needs to become
    its tool (`None` in the template when the control socket closes)."""
    while True:
        try:
            msg, fds, _flags, _addr = socket.recv_fds(control, 4096, 8)
        except InterruptedError:
            continue
        if not msg:
            return None
        if len(fds) < 4:
            for fd in fds:
                os.close(fd)
            continue
        answer = socket.socket(fileno=fds[3])
        # After stdio, the status socket and the policy: the report socket when the tool has
        # egress, then the uses channel when it has one (its number in the tool is the
        # request's).
        try:
            request = json.loads(msg)
            if set(request) != {"report", "uses_fd"}:
                raise ValueError(msg)
            report = POLICY + 1 if request["report"] else None
            uses = None
            if request["uses_fd"] is not None:
                uses = (POLICY + 1 + (report is not None), int(request["uses_fd"]))
            want = POLICY + 1 + (report is not None) + (uses is not None)
        except (ValueError, TypeError, AttributeError):
            want = -1
        if len(fds) != want:
            refuse(answer, fds[:3] + fds[4:], "expected %d descriptors, got %d" % (want, len(fds)))
            answer.close()
            continue
        if threads() != 1:
            refuse(answer, fds[:3] + fds[4:], "the template is not single-threaded")
            answer.close()
            continue
        signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGCHLD])
        pid = os.fork()
        if pid == 0:
            answer.detach()
            return fds, report, uses
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
job = serve()
if job is not None:
    run_tool(*job)
