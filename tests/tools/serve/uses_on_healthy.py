"""A tool built on the healthy fixture's `add`."""

from autotool_uses import call
from mcp.server.mcpserver import MCPServer

USES = ["healthy__add"]
mcp = MCPServer("adder")


@mcp.tool()
def plus(a: int, b: int) -> str:
    """a + b, by healthy. A refusal is left uncaught: its reason is this tool's answer."""
    return str(call("healthy__add", a=a, b=b))


if __name__ == "__main__":
    mcp.run()
