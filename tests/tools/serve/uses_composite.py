"""A tool built from another: it calls keyed's functions through autotool_uses."""

from autotool_uses import UsesError, call
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

USES = ["keyed__reveal", "keyed__square"]
mcp = MCPServer("composite")


@mcp.tool()
def relay() -> str:
    """keyed's answer, reversed: a raw key would come back in a form no redactor knows."""
    return call("keyed__reveal")[::-1]


@mcp.tool()
def fourth(x: int) -> int:
    """x to the fourth power, by squaring twice through keyed."""
    return call("keyed__square", x=call("keyed__square", x=x))


@mcp.tool()
def reach(name: str) -> str:
    """Try to call `name`; say what came back."""
    try:
        return "answered: " + str(call(name, a=1, b=2))
    except UsesError as e:
        raise ToolError("refused: " + str(e)) from e


if __name__ == "__main__":
    mcp.run()
