"""Never answers `initialize`: it sleeps at import, before the MCP server exists."""

import time

from mcp.server.mcpserver import MCPServer

time.sleep(600)

mcp = MCPServer("hang_at_import")


@mcp.tool()
def never() -> str:
    """Never reached."""
    return "never"


if __name__ == "__main__":
    mcp.run()
