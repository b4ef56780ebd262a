"""A tool built from another: it calls keyed's functions through autotool_uses."""

import base64

from autotool_uses import UsesError, call
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

USES = ["keyed__encoded", "keyed__reveal", "keyed__square"]
mcp = MCPServer("composite")


@mcp.tool()
def relay() -> str:
    """keyed's answer, reversed: a raw key would come back in a form no redactor knows."""
    return call("keyed__reveal")[::-1]


@mcp.tool()
def relay_decoded() -> str:
    """keyed's base64 answer, decoded and reversed: what the caller got, in a form no redactor
    knows on the way to the host."""
    return base64.b64decode(call("keyed__encoded")).decode()[::-1]


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
