"""A tool holding a key that echoes it: called by a composite, the key must arrive redacted."""

import os

from mcp.server.mcpserver import MCPServer

REQUIRED_ENV = ["USES_KEY"]
mcp = MCPServer("keyed")


@mcp.tool()
def reveal() -> str:
    """Say the key this tool holds."""
    return "key=" + os.environ.get("USES_KEY", "")


@mcp.tool()
def square(x: int) -> int:
    """x squared."""
    return x * x


if __name__ == "__main__":
    mcp.run()
