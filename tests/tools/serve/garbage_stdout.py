"""Writes garbage to stdout, the JSON-RPC channel, before serving MCP.

The mcp 2.3.0 SDK moves its JSON-RPC channel to a private descriptor and points fd 1 at stderr
once it serves, so the garbage must be written before `mcp.run()` to reach the channel.
"""

import os

from mcp.server.mcpserver import MCPServer

mcp = MCPServer("garbage_stdout")


@mcp.tool()
def hello() -> str:
    """Say hello."""
    return "hello"


if __name__ == "__main__":
    os.write(1, b"garbage that is not JSON-RPC\n")
    mcp.run()
