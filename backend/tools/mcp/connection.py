"""One live session to one MCP server, run in a task of its own.

The SDK's transports are context managers that must be entered and left in one task, so
each Connection runs them in a runner task and hands the ClientSession to callers. The
runner also reads a stdio server's stderr (the last lines are kept for the person) and
notices when the server goes away (the transport's read stream ends), so that the next
use can start it again. Stopping cancels the runner's scope: the SDK's own shielded
shutdown then closes stdin, waits, and kills the server's process group.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections import deque
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx2
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage

from backend.runtime.limits.descriptors import without_inherited_descriptors
from backend.tools.mcp.config import HttpServer, ServerSpec, StdioServer
from backend.tools.mcp.failures import CLOSED, STDERR_LINES, StartFailed, describe, leaf

log = logging.getLogger(__name__)

STDERR_LINE_CAP = 1000  # characters kept of one stderr line
STDERR_DRAIN = 1.0  # seconds to read a stopped server's last stderr lines
# at most this long, a stop waits for a stdio server's spawn under way to finish (normally
# milliseconds): cancelled inside the spawn, asyncio kills the new process without waiting
# for it, so it could outlive the stop
SPAWN_WAIT = 10.0
# the largest SSE event read from a streamable HTTP server (the SDK's default is 1 MiB,
# too little for a big tool result; the text the model sees is capped later anyway)
HTTP_EVENT_MAX = 64 * 2**20
CLIENT_INFO = types.Implementation(name="planact", version="1")

Item = SessionMessage | Exception


class Connection:
    def __init__(self, spec: ServerSpec, stderr: deque[str] | None = None) -> None:
        self.spec = spec
        self.stderr: deque[str] = stderr if stderr is not None else deque(maxlen=STDERR_LINES)
        self.session: ClientSession | None = None
        self.tools: list[types.Tool] = []
        self.error: str | None = None  # why the connection ended or never started
        self.cause: BaseException | None = None  # ...as the exception that said so
        # the HTTP status with which the server refused our session id (404, or the 400 some
        # servers send): it no longer knows the session (it restarted)
        self.session_refused: int | None = None
        # a call failed after such a refusal without saying why: the session may be gone,
        # so the next use starts a new one (the MCP spec: on 404 for a session, a new one)
        self.stale = False
        self._ready = anyio.Event()
        self._settled = anyio.Event()  # ready, or the runner ended
        self._done = anyio.Event()  # the runner ended: nothing of it is left running
        self._eof = anyio.Event()  # the transport's read stream ended
        self._stderr_done = anyio.Event()
        self._scope: anyio.CancelScope | None = None
        self._stopping = False
        self._spawning = False  # a stdio server's process is being started
        self._spawned = anyio.Event()  # ...and the SDK holds it (or the spawn failed)
        self._task: asyncio.Task[None] | None = None

    @property
    def alive(self) -> bool:
        return (
            self._ready.is_set()
            and not self._eof.is_set()
            and not self._done.is_set()
            and not self.stale
        )

    async def start(self, timeout: float) -> None:  # noqa: ASYNC109 (a start deadline)
        """Start the server, initialize the session and list its tools, or raise
        StartFailed (leaving nothing running)."""
        self._task = asyncio.create_task(self._run(), name=f"mcp:{self.spec.name}")
        with anyio.move_on_after(timeout):
            await self._settled.wait()
        if not self._settled.is_set():
            await self.aclose()
            raise StartFailed(f"did not answer within {timeout:g} s of starting")
        if not self._ready.is_set():
            await self.aclose()
            raise StartFailed(self.error or "stopped while starting", self.cause)

    async def call(
        self,
        tool: str,
        arguments: dict[str, Any],
        timeout: float,  # noqa: ASYNC109
        on_progress: ProgressFnT | None = None,
    ) -> types.CallToolResult:
        if self.session is None:
            raise RuntimeError("not started")
        return await self.session.call_tool(
            tool, arguments, read_timeout_seconds=timeout, progress_callback=on_progress
        )

    async def ping(self, timeout: float) -> None:  # noqa: ASYNC109 (a bounded check)
        """Ask the server whether it is there; raises when it does not answer in time."""
        if self.session is None:
            raise RuntimeError("not started")
        with anyio.fail_after(timeout):
            await self.session.send_ping()

    def lost_session(self, exc: BaseException) -> bool:
        """The call failed because the server no longer knows this session: it answered a
        request carrying our session id with 404 (the spec's word for it, whatever its
        body says), or with the 400 some servers send and the call's own error says so
        ("No valid session ID"). A call cut off for another reason is never taken for one
        (it may have run: it is not sent again)."""
        said = leaf(exc)
        if self.session_refused is None or not isinstance(said, MCPError):
            return False
        return self.session_refused == 404 or "session" in said.message.lower()

    async def ended(self, timeout: float) -> None:  # noqa: ASYNC109 (bounded wait)
        """Wait (at most timeout) for a connection that went away to finish winding down,
        so that `error` holds the transport's reason."""
        with anyio.move_on_after(timeout):
            await self._done.wait()

    async def aclose(self) -> None:
        """Stop the server and wait until its process is gone (bounded by the SDK)."""
        self._stopping = True
        if self._spawning and not self._spawned.is_set():
            # the SDK's own shutdown (close stdin, wait, kill the group, wait) only covers a
            # process it holds: let the spawn under way finish first
            with anyio.move_on_after(SPAWN_WAIT, shield=True):
                await self._spawned.wait()
        if self._scope is not None:
            self._scope.cancel()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(self._task)

    # -- the runner task -----------------------------------------------------------------

    async def _run(self) -> None:
        try:
            with anyio.CancelScope() as scope:
                self._scope = scope
                if self._stopping:
                    scope.cancel()
                async with self._transport() as (read, write):
                    send, recv = anyio.create_memory_object_stream[Item](0)
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(self._pump, read, send)
                        try:
                            await self._session(recv, write)
                        finally:
                            tg.cancel_scope.cancel()
        except Exception as exc:
            if self.error in (None, CLOSED):  # the transport's own reason says more
                command = self.spec.command if isinstance(self.spec, StdioServer) else None
                self.error, self.cause = describe(exc, command), leaf(exc)
            log.debug("MCP server %s: %s", self.spec.name, self.error, exc_info=True)
        finally:
            self.session = None
            if self.error is None and not self._stopping:
                self.error = CLOSED
            self._done.set()
            self._settled.set()

    async def _session(
        self, recv: MemoryObjectReceiveStream[Item], write: MemoryObjectSendStream[SessionMessage]
    ) -> None:
        async with ClientSession(recv, write, client_info=CLIENT_INFO) as session:
            await session.initialize()
            tools: list[types.Tool] = []
            cursor: str | None = None
            while True:
                params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
                listing = await session.list_tools(params=params)
                tools.extend(listing.tools)
                cursor = listing.next_cursor
                if not cursor:
                    break
            self.tools, self.session = tools, session
            self._ready.set()
            self._settled.set()
            await self._eof.wait()

    async def _pump(
        self, read: MemoryObjectReceiveStream[Item], send: MemoryObjectSendStream[Item]
    ) -> None:
        """Pass the transport's messages to the session; its end is the server's end."""
        try:
            async with send:
                async for item in read:
                    await send.send(item)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass
        finally:
            if self.error is None and not self._stopping:
                self.error = CLOSED
            self._eof.set()

    @contextlib.asynccontextmanager
    async def _transport(
        self,
    ) -> AsyncIterator[tuple[Any, Any]]:
        spec = self.spec
        if isinstance(spec, HttpServer):
            client = create_mcp_http_client(headers=spec.headers or None)
            client.event_hooks["response"].append(self._watch_session)
            async with (
                client,
                streamable_http_client(
                    spec.url, http_client=client, max_sse_event_size=HTTP_EVENT_MAX
                ) as streams,
            ):
                yield streams
            return
        assert isinstance(spec, StdioServer)
        async with self._stdio(spec) as streams:
            yield streams

    async def _watch_session(self, response: httpx2.Response) -> None:
        """Note a refusal of our session id (the server restarted and forgot it)."""
        if response.status_code in (400, 404) and response.request.headers.get("mcp-session-id"):
            self.session_refused = response.status_code

    @contextlib.asynccontextmanager
    async def _stdio(self, spec: StdioServer) -> AsyncIterator[tuple[Any, Any]]:
        # only fds 0-2 reach the server (the server's event loop would hand it its own)
        command, args = without_inherited_descriptors(spec.command, spec.args, spec.env)
        params = StdioServerParameters(
            command=command, args=args, env=spec.env or None, cwd=spec.cwd
        )
        rfd, wfd = os.pipe()
        os.set_blocking(rfd, False)
        errlog = os.fdopen(wfd, "w")
        self._spawning = True
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._read_stderr, rfd)
                try:
                    async with stdio_client(params, errlog=errlog) as streams:
                        self._spawned.set()
                        errlog.close()  # the server holds its own copy
                        yield streams
                finally:
                    errlog.close()
                    # the server is gone: read what it printed last (bounded: a child it
                    # left behind may keep the pipe open)
                    with anyio.move_on_after(STDERR_DRAIN, shield=True):
                        await self._stderr_done.wait()
                    tg.cancel_scope.cancel()
        finally:
            self._spawned.set()  # however it ended, no spawn is under way any more
            os.close(rfd)

    async def _read_stderr(self, fd: int) -> None:
        buf = b""
        try:
            while True:
                await anyio.wait_readable(fd)
                try:
                    chunk = os.read(fd, 65536)
                except BlockingIOError:
                    continue
                if not chunk:
                    break
                buf += chunk
                *lines, buf = buf.split(b"\n")
                if len(buf) > STDERR_LINE_CAP * 4:
                    lines, buf = [*lines, buf], b""
                for line in lines:
                    self._keep_line(line)
        finally:
            if buf:
                self._keep_line(buf)
            self._stderr_done.set()

    def _keep_line(self, raw: bytes) -> None:
        line = raw.decode("utf-8", "replace").rstrip("\r")
        if len(line) > STDERR_LINE_CAP:
            line = line[:STDERR_LINE_CAP] + " […]"
        self.stderr.append(line)
        log.debug("MCP server %s stderr: %s", self.spec.name, line)
