"""A tool that puts its key's bytes into the payloads the protocol base64-encodes.

`blocks` answers with an image, an audio clip and an embedded blob whose bytes hold the value of
BINARY_API_KEY (raw at two alignments of base64, and URL-encoded byte by byte at the third), an
embedded text resource that holds it as text, and one clean image. `failed` answers with an
error whose image and structured copy hold it. The suite calls both through `autotool serve`
(where nothing of the key may arrive, and the clean image arrives unchanged) and through its raw
client (the control: every payload decodes to the key).
"""

import base64
import os

from mcp.server.mcpserver import MCPServer
from mcp.types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    TextContent,
    TextResourceContents,
)

REQUIRED_ENV = ["BINARY_API_KEY"]
mcp = MCPServer("binary")

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"
CLEAN = base64.b64encode(PNG + b"\x00\x01\x02 a clean picture IEND").decode()


def key() -> bytes:
    return os.environ.get("BINARY_API_KEY", "").encode()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def image() -> ImageContent:
    return ImageContent(type="image", data=b64(PNG + b"tEXt" + key() + b"\x00IEND"), mimeType="image/png")


@mcp.tool()
def blocks():
    k = key()
    url_encoded = "".join("%%%02X" % c for c in k).encode()
    return [
        TextContent(type="text", text="binary blocks follow"),
        image(),
        AudioContent(type="audio", data=b64(b"RIFF\x00\x00WAVE" + k), mimeType="audio/wav"),
        EmbeddedResource(
            type="resource",
            resource=BlobResourceContents(
                uri="file:///k.bin", blob=b64(url_encoded + b"\x00\xff"), mimeType="application/octet-stream"
            ),
        ),
        EmbeddedResource(
            type="resource",
            resource=TextResourceContents(uri="file:///k.txt", mimeType="text/plain", text="the key: " + k.decode()),
        ),
        ImageContent(type="image", data=CLEAN, mimeType="image/png"),
    ]


@mcp.tool()
def failed():
    picture = image()
    return CallToolResult(
        content=[TextContent(type="text", text="it failed; a picture of why"), picture],
        structured_content={"why": picture.model_dump(by_alias=True)},
        is_error=True,
    )


if __name__ == "__main__":
    mcp.run()
