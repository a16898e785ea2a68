"""A real MCP server (the SDK's MCPServer) for the tests.

python tools_server.py            # stdio
python tools_server.py http PORT  # streamable HTTP on 127.0.0.1:PORT/mcp
"""

from __future__ import annotations

import base64
import os
import sys

import anyio
from mcp.server.mcpserver import Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import (
    BlobResourceContents,
    ContentBlock,
    EmbeddedResource,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

# a 1x1 PNG
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)

server = MCPServer("tools")


@server.tool()
def add(a: float, b: float) -> str:
    """Add two numbers."""
    return str(a + b)


@server.tool()
def fail(reason: str = "it broke") -> str:
    """Always fails."""
    raise ToolError(reason)


@server.tool()
async def hang() -> str:
    """Never answers."""
    print("hang: called", file=sys.stderr, flush=True)
    await anyio.sleep_forever()
    return "never"


@server.tool()
def big(megabytes: int = 10) -> str:
    """Returns a large text."""
    return "x" * (megabytes * 2**20)


@server.tool()
def image() -> Image:
    """Returns a PNG image."""
    return Image(data=PNG, format="png")


@server.tool()
def pid() -> str:
    """The server's process id."""
    return str(os.getpid())


@server.tool()
def fds() -> str:
    """The server's open file descriptors."""
    return " ".join(sorted(os.listdir("/proc/self/fd"), key=int))


@server.tool()
def say(text: str) -> str:
    """Prints text to stderr and returns it."""
    print(f"say: {text}", file=sys.stderr, flush=True)
    return text


@server.tool()
def report() -> list[ContentBlock]:
    """Returns text, a text resource, a binary resource and a resource link."""
    return [
        TextContent(text="see the attachments"),
        EmbeddedResource(resource=TextResourceContents(uri="mem://notes.txt", text="a note")),
        EmbeddedResource(
            resource=BlobResourceContents(
                uri="mem://logo.png", mime_type="image/png", blob=base64.b64encode(PNG).decode()
            )
        ),
        ResourceLink(uri="https://example.org/doc", name="doc"),
    ]


if __name__ == "__main__":
    print(f"tools server up, pid {os.getpid()}", file=sys.stderr, flush=True)
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
