"""A real MCP server (the SDK's MCPServer) for the tests.

python tools_server.py               # stdio
python tools_server.py http PORT     # streamable HTTP on 127.0.0.1:PORT/mcp
python tools_server.py http400 PORT  # ...answering an unknown session with 400, as some
                                     # servers do (the SDK's own answer is 404)
"""

from __future__ import annotations

import base64
import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp.server.mcpserver import Context, Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import (
    BlobResourceContents,
    ContentBlock,
    EmbeddedResource,
    ResourceLink,
    TextContent,
    TextResourceContents,
    Tool,
    ToolExecution,
)

# a 1x1 PNG
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)

TASK_ONLY = {"queued"}  # tools listed as callable only task-augmented


class ToolsServer(MCPServer):
    async def list_tools(self) -> list[Tool]:
        tools = await super().list_tools()
        for tool in tools:
            if tool.name in TASK_ONLY:
                tool.execution = ToolExecution(task_support="required")
        return tools


server = ToolsServer("tools")


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
def tally(path: str) -> str:
    """Adds a line to the file at path and says how many it has (how often it was called)."""
    with open(path, "a") as f:
        f.write("called\n")
    return f"tally {Path(path).read_text().count('called')}"


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


@server.tool()
async def steps(count: int, ctx: Context, gate: str = "") -> str:
    """Reports progress for each of count steps; with a gate file, waits for it to exist
    after the first step (so a test sees the progress while the call runs)."""
    for i in range(count):
        await ctx.report_progress(i + 1, count, f"step {i + 1} of {count}")
        if i == 0 and gate:
            while not Path(gate).exists():  # noqa: ASYNC110 (set by another process)
                await anyio.sleep(0.01)
    return f"{count} steps done"


@server.tool()
def queued() -> str:
    """Listed as callable only as a task."""
    return "ran without a task"


class SessionNotFoundIs400:
    """ASGI middleware: the SDK's 404 "Session not found" answered as a 400 instead (with
    ``text``: as a plain-text 400 that is no JSON-RPC error, as some servers answer)."""

    def __init__(self, app: Any, text: bool = False) -> None:
        self.app = app
        self.text = text

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        async def rewrite(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start" and message["status"] == 404:
                headers = [(k, v) for k, v in message["headers"] if k != b"content-length"]
                if self.text:
                    headers = [(k, v) for k, v in headers if k != b"content-type"]
                    headers.append((b"content-type", b"text/plain"))
                message = {**message, "status": 400, "headers": headers}
            elif (
                self.text
                and message["type"] == "http.response.body"
                and (b"Session not found" in message.get("body", b""))
            ):
                message = {**message, "body": b"Bad Request"}
            elif message["type"] == "http.response.body" and b"Session not found" in message.get(
                "body", b""
            ):
                body = {
                    "jsonrpc": "2.0",
                    "id": None,
                    "error": {"code": -32000, "message": "Bad Request: No valid session ID"},
                }
                message = {**message, "body": json.dumps(body).encode()}
            await send(message)

        await self.app(scope, receive, rewrite)


if __name__ == "__main__":
    print(f"tools server up, pid {os.getpid()}", file=sys.stderr, flush=True)
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    elif len(sys.argv) > 2 and sys.argv[1] in ("http400", "http400text"):
        import uvicorn

        app = SessionNotFoundIs400(
            server.streamable_http_app(host="127.0.0.1"), text=sys.argv[1] == "http400text"
        )
        uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
    else:
        server.run()
