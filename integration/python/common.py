"""Shared pieces of the integration clients: how to start `autotool serve`, the tool sources the
tests create, and how results become JSON for the Rust side.

Written against the official MCP Python SDK, `mcp` 2.3.0 (the test runtime's). Everything a
script prints on stdout is JSON for the Rust test; logs and the server's stderr go to stderr.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from typing import Any

import mcp_types as types
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError

# Environment `autotool serve` needs from the test, passed on explicitly: the SDK's stdio client
# gives a server only a few basic variables of its own (PATH, HOME, ...).
SERVE_ENV = (
    "AUTOTOOL_HOME",
    "AUTOTOOL_RUNTIME",
    "AUTOTOOL_LAUNCHER",
    "AUTOTOOL_LOG",
    "AUTOTOOL_SANDBOX",
    "RUST_BACKTRACE",
)


def serve_params(autotool: str, sandbox: str) -> StdioServerParameters:
    """`autotool serve --sandbox <sandbox>` with the test's AUTOTOOL_* environment."""
    env = {k: os.environ[k] for k in SERVE_ENV if k in os.environ}
    return StdioServerParameters(command=autotool, args=["serve", "--sandbox", sandbox], env=env)


def emit(obj: Any) -> None:
    """One JSON line on stdout, flushed (the Rust side reads line by line)."""
    sys.stdout.write(json.dumps(obj, default=str) + "\n")
    sys.stdout.flush()


def log(*parts: Any) -> None:
    print(*parts, file=sys.stderr, flush=True)


def result_json(result: types.CallToolResult) -> dict[str, Any]:
    """A call result as the Rust side reads it: the texts joined, the structured content, isError."""
    texts = [block.text for block in result.content if isinstance(block, types.TextContent)]
    return {
        "kind": "result",
        "is_error": bool(result.is_error),
        "text": "\n".join(texts),
        "structured": result.structured_content,
    }


def error_json(exc: BaseException) -> dict[str, Any]:
    """An exception as JSON: a JSON-RPC error keeps its code and message."""
    if isinstance(exc, MCPError):
        return {"kind": "error", "code": exc.code, "message": exc.message, "data": exc.data}
    return {
        "kind": "exception",
        "type": type(exc).__name__,
        "message": str(exc),
        "traceback": "".join(traceback.format_exception(exc)),
    }


def server_info_json(info: types.Implementation | None) -> dict[str, Any] | None:
    if info is None:
        return None
    return {"name": info.name, "version": info.version}


def tool_source(name: str, body: str, *, preamble: str = "") -> str:
    """A whole tool file in the shape DESIGN §4 gives: an MCPServer with the functions in `body`."""
    return (
        "from mcp.server.mcpserver import MCPServer\n"
        f"{preamble}\n"
        "REQUIRED_ENV = []\n"
        f'mcp = MCPServer("{name}")\n\n'
        f"{body.strip()}\n\n"
        'if __name__ == "__main__":\n'
        "    mcp.run()\n"
    )


ADD_V1 = '''
@mcp.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b
'''

# A new version of the adder whose smoke test raises: it must fail at the smoke stage, with the
# traceback, and leave version 1 serving.
ADD_SMOKE_RAISES = '''
@mcp.tool()
def add(a: int, b: int) -> int:
    """Add two integers (broken)."""
    raise ValueError("adder v2 is broken: refusing to add")
'''

# The repaired second version: a different answer, so the test can tell which version served.
ADD_V2 = '''
@mcp.tool()
def add(a: int, b: int) -> int:
    """Add two integers, plus one thousand."""
    return a + b + 1000
'''

# Raises while the module is imported, before the server ever answers.
GREET_RAISES_AT_IMPORT = '''
raise RuntimeError("greeter cannot start: GREETING_STYLE is not configured")

@mcp.tool()
def greet(name: str) -> str:
    """Greet someone."""
    return "hello, " + name
'''

GREET_FIXED = '''
@mcp.tool()
def greet(name: str) -> str:
    """Greet someone."""
    return "hello, " + name
'''

# A tool whose smoke test takes a while: the window in which a serve is killed mid-create.
# Create it with `preamble=SLOW_PING_PREAMBLE`. A delay it cannot sleep (negative, or 1e308 from
# verification's probes) is refused with a ToolError, as a tool should.
SLOW_PING_PREAMBLE = "import time\nfrom mcp.server.mcpserver.exceptions import ToolError\n"
SLOW_PING = '''
@mcp.tool()
def ping(delay: float = 0.0) -> str:
    """Answer pong after `delay` seconds (0 to 60)."""
    if not 0 <= delay <= 60:
        raise ToolError(f"delay must be 0 to 60 seconds, not {delay}")
    time.sleep(delay)
    return "pong"
'''
