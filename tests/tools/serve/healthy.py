"""A well-behaved tool for the `autotool serve` tests: the server must keep serving it while
other tools misbehave, and its own misbehaving functions must only fail the call they are in.

Those functions crash, hang or exit on ordinary input, so verification's robustness probes would
refuse the tool: the tests create it with `"verify": "quick"`.

Nothing here writes to stdout, the JSON-RPC channel.
"""

import os
import sys
import time
import uuid

from mcp.server.mcpserver import MCPServer

# Changes with every process: shows whether a call reached a restarted process.
INSTANCE = uuid.uuid4().hex

mcp = MCPServer("healthy")


@mcp.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@mcp.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@mcp.tool()
def instance() -> str:
    """This process's instance id."""
    return INSTANCE


@mcp.tool()
def crash(status: int) -> str:
    """End the process at once, mid-call, with `status`."""
    sys.stderr.write(f"crash: exiting with {status}\n")
    sys.stderr.flush()
    os._exit(status)


@mcp.tool()
def nap(seconds: float) -> str:
    """Sleep, then answer."""
    time.sleep(seconds)
    return f"slept {seconds}"


def _flood(megabytes: int) -> int:
    chunk = b"E" * 65535 + b"\n"
    written = 0
    for _ in range(megabytes * 16):
        view = memoryview(chunk)
        while view:
            n = os.write(2, view)
            written += n
            view = view[n:]
    return written


@mcp.tool()
def flood(megabytes: int) -> str:
    """Write `megabytes` MiB to stderr, then answer with the byte count."""
    return f"flooded {_flood(megabytes)} bytes"


@mcp.tool()
def flood_then_fail(megabytes: int) -> str:
    """Write `megabytes` MiB to stderr, then raise (an error result carries stderr)."""
    _flood(megabytes)
    raise RuntimeError("failed after flooding stderr")


@mcp.tool()
def garble() -> str:
    """Write garbage onto the JSON-RPC channel itself, mid-call.

    While serving, the SDK keeps the channel on a private descriptor (fd 1 points at stderr);
    a hostile tool can still find it.
    """
    from mcp.server import stdio

    claim = stdio._claims.get(1)
    fd = claim.private_fd if claim is not None and claim.private_fd is not None else 1
    os.write(fd, b"\x00garbage mid-call {not json\n")
    return "garbled"


@mcp.tool()
def exists(path: str) -> bool:
    """Whether `path` exists as this process sees it (the sandbox hides the host's files)."""
    return os.path.exists(path)


@mcp.tool()
def big(size: int) -> str:
    """A string of `size` characters: 'A'*... ending in 'END'."""
    return "A" * (size - 3) + "END"


if __name__ == "__main__":
    mcp.run()
