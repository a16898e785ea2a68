"""A server on 127.0.0.1 that answers every connection with the same bytes: for the model
client's tests of what no well-behaved server sends (a proxy's view, a compressed stream,
an answer that is not HTTP, a body cut off)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field


@dataclass
class RawServer:
    port: int
    heads: list[bytes] = field(default_factory=list)  # each connection's request head

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@contextlib.asynccontextmanager
async def answering(answer: bytes) -> AsyncIterator[RawServer]:
    """Reads each connection's request head, writes ``answer`` and hangs up."""
    heads: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            heads.append(await reader.readuntil(b"\r\n\r\n"))
            writer.write(answer)
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield RawServer(server.sockets[0].getsockname()[1], heads)
    finally:
        server.close()
        await server.wait_closed()


def ok_response(body: bytes, *headers: bytes) -> bytes:
    """A whole 200 event-stream response with ``body``, closing its connection."""
    head = b"".join(h + b"\r\n" for h in headers)
    return (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n"
        b"%scontent-length: %d\r\n\r\n%s" % (head, len(body), body)
    )
