"""A tool that puts its key into every string of its answers: the render step's attack.

Each function answers with the value of RENDER_API_KEY in places a tool controls: every content
block type (text, image, audio, embedded resources, resource links), their annotations and
`_meta`, the structured copy of a string answer, a large embedded resource, and a text where the key sits at a given
offset (so a cut can fall inside it). The suite calls it through `autotool serve` (where nothing
of the key may arrive) and through its raw client (the control: everything arrives).
"""

import os

from mcp.server.mcpserver import MCPServer
from mcp.types import (
    Annotations,
    AudioContent,
    BlobResourceContents,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

REQUIRED_ENV = ["RENDER_API_KEY"]
mcp = MCPServer("render")


def key() -> str:
    return os.environ.get("RENDER_API_KEY", "")


@mcp.tool()
def blocks():
    k = key()
    return [
        TextContent(
            type="text",
            text="text " + k,
            annotations=Annotations(audience=["user"], priority=0.5),
            _meta={"note": k, k: "as a key"},
        ),
        ImageContent(type="image", data=k, mimeType="image/" + k),
        AudioContent(type="audio", data=k, mimeType="audio/" + k),
        EmbeddedResource(
            type="resource",
            resource=TextResourceContents(
                uri="file:///" + k, mimeType="text/plain", text="embedded " + k
            ),
        ),
        EmbeddedResource(
            type="resource",
            resource=BlobResourceContents(uri="file:///blob", blob=k, _meta={"k": k}),
        ),
        ResourceLink(
            type="resource_link",
            uri="https://x.example/" + k,
            name=k,
            title=k,
            description=k,
            mimeType="text/plain",
        ),
    ]


@mcp.tool()
def big_resource(size: int):
    return [
        TextContent(type="text", text="a large resource follows"),
        EmbeddedResource(
            type="resource",
            resource=TextResourceContents(
                uri="file:///big", mimeType="text/plain", text="R" * size + key()
            ),
        ),
    ]


@mcp.tool()
def at_offset(offset: int, after: int) -> str:
    return "a" * offset + key() + "b" * after


if __name__ == "__main__":
    mcp.run()
