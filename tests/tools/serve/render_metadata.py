"""A tool that computes its key into what it lists: a function's title and description, a
parameter's default, title, description and examples, the output's description, and the
annotations' title, all read from META_API_KEY at import. Verification stores what `tools/list`
says; none of it may keep the value.
"""

import os
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations
from pydantic import Field

REQUIRED_ENV = ["META_API_KEY"]
K = os.environ.get("META_API_KEY", "none")
mcp = MCPServer("meta")


@mcp.tool(
    title="Lookup " + K,
    description="Looks a word up with the key " + K,
    annotations=ToolAnnotations(title="annotated " + K, readOnlyHint=True),
)
def lookup(
    word: Annotated[str, Field(description="the word; the key is " + K, title=K, examples=[K])] = K,
) -> Annotated[str, Field(description="the answer, made with " + K)]:
    return "looked up " + str(len(word))


if __name__ == "__main__":
    mcp.run()
