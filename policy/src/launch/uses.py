"""Calls from this tool to the other tools' functions it declares in USES, through autotool.

    from autotool_uses import call
    forecast = call("weather__forecast", city="Paris")

Each call runs the called function in its own tool's sandbox, with that tool's own keys (which
this tool never sees: its answer is redacted before it arrives). `call` returns the function's
structured answer when it has one (a plain return value), else its text, and raises UsesError
with the reason when autotool refuses the call or the function fails. UsesError is a ToolError,
so one left uncaught reaches the caller of this tool as its answer, with the reason.
"""

import json
import os
import threading

try:
    from mcp.server.mcpserver.exceptions import ToolError as _Base
except ImportError:  # a tool that does not run on the SDK
    _Base = Exception

__all__ = ["UsesError", "call"]

_MAX_ANSWER = 16 << 20
_lock = threading.Lock()
_buffer = bytearray()


class UsesError(_Base):
    """autotool refused the call, or the called function failed: the message says why."""


def call(name, /, **arguments):
    """Call the mounted function `name` (one of this tool's USES) with `arguments`."""
    fd = os.environ.get("AUTOTOOL_USES_FD")
    if not fd:
        raise UsesError(
            "this tool declares no USES, so it has no channel to other tools"
        )
    request = json.dumps({"name": name, "arguments": arguments}).encode() + b"\n"
    with _lock:
        view = memoryview(request)
        while view:
            view = view[os.write(int(fd), view) :]
        line = _read_line(int(fd))
    answer = json.loads(line)
    if "error" in answer:
        raise UsesError(answer["error"])
    return answer.get("result")


def _read_line(fd):
    while True:
        end = _buffer.find(b"\n")
        if end >= 0:
            line = bytes(_buffer[:end])
            del _buffer[: end + 1]
            return line
        if len(_buffer) > _MAX_ANSWER:
            raise UsesError("autotool's answer was larger than this module reads")
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            raise UsesError("the channel to autotool is closed")
        _buffer.extend(chunk)
