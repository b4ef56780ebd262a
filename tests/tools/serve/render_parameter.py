"""A tool whose parameter is named with its key (read from PARAM_API_KEY at import): the name
would be in every host's tool list and sent back in every call."""

import inspect
import os

from mcp.server.mcpserver import MCPServer

REQUIRED_ENV = ["PARAM_API_KEY"]
K = os.environ.get("PARAM_API_KEY", "nokey")
mcp = MCPServer("param")


def lookup(**arguments) -> str:
    return "ok"


lookup.__signature__ = inspect.Signature(
    [inspect.Parameter(K, inspect.Parameter.KEYWORD_ONLY, annotation=str)],
    return_annotation=str,
)
mcp.tool()(lookup)


if __name__ == "__main__":
    mcp.run()
