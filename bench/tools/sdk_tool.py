"""A tool as autotool runs them: an MCP server on the official Python SDK with one function."""

from mcp.server.mcpserver import MCPServer

REQUIRED_ENV = []

mcp = MCPServer("bench_sdk_tool")


@mcp.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


mcp.run()
