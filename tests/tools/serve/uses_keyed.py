"""A tool holding a key that echoes it: called by a composite, the key must arrive redacted.

It also hands the key over base64-encoded, a form the redactor does not read: the documented
limit of redaction (docs/keys.md), which its caller gets through.
"""

import base64
import os

from mcp.server.mcpserver import MCPServer

REQUIRED_ENV = ["USES_KEY"]
mcp = MCPServer("keyed")


@mcp.tool()
def reveal() -> str:
    """Say the key this tool holds."""
    return "key=" + os.environ.get("USES_KEY", "")


@mcp.tool()
def encoded() -> str:
    """The key this tool holds, base64-encoded."""
    return base64.b64encode(("key=" + os.environ.get("USES_KEY", "")).encode()).decode()


@mcp.tool()
def square(x: int) -> int:
    """x squared."""
    return x * x


if __name__ == "__main__":
    mcp.run()
