"""McpManager: the configured MCP servers, started lazily, reused, restarted when they die.

    manager = McpManager.from_settings(settings)
    listing = await manager.tools_for(["files"])      # starts "files" if needed
    result = await manager.call("files__read", '{"path": "a.txt"}')
    await manager.refresh()                           # check them (GET /api/mcp/servers)
    manager.states()                                  # ...and what the person sees
    await manager.aclose()                            # stops every server process

Every fault is a failure McpResult in plain words naming the server (and its command or
URL); nothing raises to the caller. A server that cannot start is tried again on a later
use, after a back-off that doubles (MCP_RESTART_BACKOFF, at most BACKOFF_MAX): it comes
back by itself once it answers. A server that dies after starting is started again on next
use; a streamable HTTP server that no longer knows our session (it restarted) gets a new
session and the call is sent again, once.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from pydantic import ValidationError

from backend.runtime.base import cap_text
from backend.tools.mcp.config import HttpServer, ServerSpec, load_servers
from backend.tools.mcp.failures import (
    CLOSED,
    STDERR_LINES,
    StartFailed,
    connection_closed,
    describe,
    leaf,
    timed_out,
    unreachable,
)
from backend.tools.mcp.results import McpResult, Progress, convert, failure, progress_line

if TYPE_CHECKING:
    import mcp_types as types

    from backend.tools.mcp.connection import Connection

BACKOFF_MAX = 60.0  # the longest wait between two attempts to start a failed server
PING_TIMEOUT = 5.0  # seconds a streamable HTTP server has to answer GET /api/mcp/servers' ping
ENDED_WAIT = 2.0  # seconds to learn why a connection that went away ended
CALL_GRACE = 5.0  # beyond the call timeout, for the SDK to give up on its own first


@dataclass(frozen=True)
class McpTool:
    name: str  # server__tool, as the model calls it
    server: str
    tool: str
    description: str
    input_schema: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
        }


@dataclass
class ToolListing:
    tools: list[McpTool] = field(default_factory=list)
    failures: list[McpResult] = field(default_factory=list)  # servers that did not start
    down: dict[str, str] = field(default_factory=dict)  # ...by name: why


def needs_tasks(tool: types.Tool) -> bool:
    """The tool can only be called task-augmented (`taskSupport: "required"`), which this
    client does not do: it is never offered."""
    execution = tool.execution
    return execution is not None and execution.task_support == "required"


NEEDS_TASKS = (
    'not offered: it can only be called as a task (taskSupport "required"), which planact '
    "does not do"
)


@dataclass
class _Server:
    spec: ServerSpec
    stderr: deque[str] = field(default_factory=lambda: deque(maxlen=STDERR_LINES))
    conn: Connection | None = None
    starting: bool = False
    error: str | None = None
    failed_starts: int = 0
    retry_at: float = 0.0
    starts: int = 0  # processes (or sessions) started so far
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    @property
    def name(self) -> str:
        return self.spec.name


class McpManager:
    def __init__(
        self,
        servers: dict[str, ServerSpec],
        *,
        call_timeout: float = 60.0,
        start_timeout: float = 30.0,
        restart_backoff: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._servers = {name: _Server(spec) for name, spec in servers.items()}
        self.call_timeout = call_timeout
        self.start_timeout = start_timeout
        self.restart_backoff = restart_backoff
        self._clock = clock
        self._closed = False

    @classmethod
    def from_settings(cls, settings: Any) -> McpManager:
        """Raises McpConfigError when MCP_SERVERS_FILE is unusable."""
        return cls(
            load_servers(settings.mcp_servers_file),
            call_timeout=settings.mcp_call_timeout,
            start_timeout=settings.mcp_start_timeout,
            restart_backoff=settings.mcp_restart_backoff,
        )

    @property
    def names(self) -> list[str]:
        return list(self._servers)

    # -- what the model is offered ---------------------------------------------------------

    async def tools_for(self, servers: list[str] | None = None) -> ToolListing:
        """The tools of the given servers (all when None), starting them as needed; a
        server that is unknown or cannot start is a failure naming it."""
        listing = ToolListing()
        wanted: list[_Server] = []
        for name in self.names if servers is None else servers:
            srv = self._servers.get(name)
            if srv is None:
                listing.failures.append(failure(self._unknown_server(name)))
            elif srv not in wanted:
                wanted.append(srv)
        got = await asyncio.gather(*(self._ensure(srv) for srv in wanted))
        for srv, conn in zip(wanted, got, strict=True):
            if isinstance(conn, str):
                listing.failures.append(failure(conn))
                listing.down[srv.name] = conn
                continue
            for tool in conn.tools:
                if needs_tasks(tool):
                    continue
                listing.tools.append(
                    McpTool(
                        f"{srv.name}__{tool.name}",
                        srv.name,
                        tool.name,
                        tool.description or tool.title or "",
                        tool.input_schema,
                    )
                )
        return listing

    # -- one call --------------------------------------------------------------------------

    async def call(
        self,
        name: str,
        arguments_json: str | dict[str, Any] | None,
        timeout: float | None = None,  # noqa: ASYNC109 (sent to the server too)
        *,
        files_dir: Path | None = None,
        workspace: Path | None = None,
        on_progress: Progress | None = None,
    ) -> McpResult:
        """Call `server__tool` with a JSON object of arguments. Images and binary
        resources go to files_dir when given (named relative to ``workspace`` when that
        holds it); ``on_progress`` gets the server's progress notifications as lines."""
        server, sep, tool = name.partition("__")
        if not sep or not server or not tool:
            return failure(
                f"MCP tool name {name!r} must be server__tool (for example {self._example()}).",
                name,
            )
        srv = self._servers.get(server)
        if srv is None:
            return failure(self._unknown_server(server), name)
        arguments, problem = _arguments(arguments_json)
        if problem:
            return failure(f"Arguments for {name}: {problem}", name)
        conn = await self._ensure(srv)
        if isinstance(conn, str):
            return failure(conn, name)
        known = {t.name: t for t in conn.tools}
        if tool not in known or needs_tasks(known[tool]):
            offered = ", ".join(f"{server}__{t}" for t, d in known.items() if not needs_tasks(d))
            if tool in known:
                return failure(
                    f"MCP tool {name} is {NEEDS_TASKS}; its server's tools: {offered or 'none'}.",
                    name,
                )
            return failure(
                f"MCP server {server!r} has no tool {tool!r}; its tools: {offered or 'none'}.",
                name,
            )
        limit = self.call_timeout if timeout is None else timeout
        notify = None
        if on_progress is not None:
            report = on_progress

            async def notify(progress: float, total: float | None, message: str | None) -> None:
                await report(progress_line(progress, total, message))

        for attempt in (1, 2):
            try:
                with anyio.fail_after(limit + CALL_GRACE):
                    result = await conn.call(tool, arguments, limit, notify)
            except TimeoutError:
                return failure(f"MCP tool {name} timed out after {limit:g} s.", name)
            except ValidationError as exc:
                return failure(
                    f"MCP tool {name}: the server's answer is not a valid tool result "
                    f"({exc.error_count()} problem(s)).",
                    name,
                )
            except Exception as exc:
                if attempt == 1 and conn.lost_session(exc):
                    # the server restarted and forgot the session: a new one, the call again
                    renewed = await self._ensure(srv, replace=conn)
                    if isinstance(renewed, str):
                        return failure(
                            f"MCP server {self._label(srv)} restarted and forgot our session "
                            f"during the call to {name}; a new session failed: {renewed}",
                            name,
                        )
                    conn = renewed
                    continue
                if conn.session_refused is not None:
                    # refused with a session id, for a reason it did not give (a 400 with a
                    # body that is no JSON-RPC error): the next use starts a new session
                    conn.stale = True
                    return failure(
                        self._call_error(srv, conn, name, exc, limit)
                        + (
                            f" (the server refused our session with HTTP {conn.session_refused}; "
                            "the next call starts a new one)"
                        ),
                        name,
                    )
                if not conn.alive:
                    await conn.ended(ENDED_WAIT)
                return failure(self._call_error(srv, conn, name, exc, limit), name)
            break
        try:
            return convert(result, name, files_dir, workspace)
        except OSError as exc:
            return failure(f"MCP tool {name}: cannot save its files: {exc}", name)

    def _call_error(
        self, srv: _Server, conn: Connection, name: str, exc: Exception, limit: float
    ) -> str:
        code = getattr(exc, "code", None)
        if timed_out(code):
            return f"MCP tool {name} timed out after {limit:g} s."
        if unreachable(conn.cause) or unreachable(leaf(exc)):  # it was gone before the call
            why = conn.error if unreachable(conn.cause) else describe(exc)
            return (
                f"MCP server {self._label(srv)} was down when {name} was called (it could "
                f"not be reached: {why}); it is tried again on next use."
            )
        if connection_closed(code) or not conn.alive:
            why = f" ({conn.error})" if conn.error and conn.error != CLOSED else ""
            tail = f" Its last stderr line: {srv.stderr[-1]}" if srv.stderr else ""
            return (
                f"MCP server {self._label(srv)} stopped during the call to {name}{why}; it "
                f"is started again on next use.{tail}"
            )
        return f"MCP tool {name} failed: {describe(exc)}"

    # -- starting and restarting -----------------------------------------------------------

    async def _ensure(
        self, srv: _Server, replace: Connection | None = None, *, why: str | None = None
    ) -> Connection | str:
        """A live connection to the server, or why there is none. ``replace``: a connection
        found unusable (its session is gone, it does not answer): a new one is made unless
        another caller did so already; ``why`` says what was wrong with it."""
        async with srv.lock:
            if self._closed:
                return f"MCP server {srv.name!r}: the MCP manager is closed."
            conn = srv.conn
            if conn is not None and conn.alive and conn is not replace:
                return conn
            if conn is not None:  # it died since its last use (or is replaced)
                srv.error = why or conn.error
                srv.conn = None
                await conn.aclose()
            wait = srv.retry_at - self._clock()
            if srv.failed_starts and wait > 0:
                return (
                    f"MCP server {self._label(srv)} is down ({srv.error}); next attempt in "
                    f"{max(wait, 1):.0f} s."
                )
            from backend.tools.mcp.connection import Connection  # the SDK, at first use

            conn = Connection(srv.spec, srv.stderr)
            # held in srv.conn while it starts, so that aclose() stops it too
            srv.conn, srv.starting, srv.starts = conn, True, srv.starts + 1
            try:
                await conn.start(self.start_timeout)
            except StartFailed as exc:
                srv.conn = None
                if self._closed:
                    return f"MCP server {srv.name!r}: the MCP manager is closed."
                srv.failed_starts += 1
                delay = self.restart_backoff * 2 ** (srv.failed_starts - 1)
                srv.retry_at = self._clock() + min(delay, BACKOFF_MAX)
                srv.error = str(exc)
                tail = f" Its last stderr line: {srv.stderr[-1]}" if srv.stderr else ""
                if unreachable(exc.cause):
                    return f"MCP server {self._label(srv)} cannot be reached: {exc}.{tail}"
                return f"MCP server {self._label(srv)} could not start: {exc}.{tail}"
            except BaseException:  # the caller gave up (a stopped run): leave nothing running
                srv.conn = None
                with anyio.CancelScope(shield=True):
                    await conn.aclose()
                raise
            finally:
                srv.starting = False
            srv.error, srv.failed_starts = None, 0
            return conn

    # -- what the person sees --------------------------------------------------------------

    def states(self) -> list[dict[str, Any]]:
        """[{"name", "state", "tools", "error"?, "stderr"?}] in configuration order."""
        out: list[dict[str, Any]] = []
        for srv in self._servers.values():
            conn = srv.conn
            entry: dict[str, Any] = {"name": srv.name, "state": "failed", "tools": []}
            if srv.starting:
                entry["state"] = "starting"
            elif conn is not None and conn.alive:
                entry["state"] = "ready"
                entry["tools"] = [{"name": t.name, "description": _shown(t)} for t in conn.tools]
            if entry["state"] == "failed":
                error = (
                    (conn.error if conn is not None else None)
                    or srv.error
                    or ("closed" if self._closed else "not started yet")
                )
                where = srv.spec.url if isinstance(srv.spec, HttpServer) else None
                entry["error"] = f"{where}: {error}" if where and srv.starts else error
            if not isinstance(srv.spec, HttpServer):
                entry["stderr"] = list(srv.stderr)
            out.append(entry)
        return out

    def started(self) -> list[str]:
        return [s.name for s in self._servers.values() if s.starts]

    async def refresh(self) -> None:
        """What GET /api/mcp/servers does before it answers: start every server not started
        yet, try again those whose back-off is over, and ask each streamable HTTP server
        that looks ready whether it still answers (one that restarted gets a new session;
        one that is gone is failed, with why)."""
        await asyncio.gather(*(self._check(srv) for srv in self._servers.values()))

    async def _check(self, srv: _Server) -> None:
        conn = srv.conn
        if isinstance(srv.spec, HttpServer) and conn is not None and conn.alive:
            try:
                await conn.ping(PING_TIMEOUT)
                return
            except Exception as exc:
                if not conn.lost_session(exc):
                    if not conn.alive:
                        await conn.ended(ENDED_WAIT)
                    why = conn.error if not conn.alive and conn.error else describe(exc)
                    if isinstance(leaf(exc), TimeoutError):
                        why = f"it did not answer a ping within {PING_TIMEOUT:g} s"
                    await self._ensure(srv, replace=conn, why=why)
                    return
                await self._ensure(srv, replace=conn)
                return
        await self._ensure(srv)

    async def aclose(self) -> None:
        """Stop every server; their processes are gone when this returns."""
        self._closed = True
        conns = [s.conn for s in self._servers.values() if s.conn is not None]
        for srv in self._servers.values():
            srv.conn = None
        await asyncio.gather(*(c.aclose() for c in conns), return_exceptions=True)

    def _label(self, srv: _Server) -> str:
        where = f" at {srv.spec.url}" if isinstance(srv.spec, HttpServer) else ""
        return f"{srv.name!r}{where}"

    def _unknown_server(self, name: str) -> str:
        configured = ", ".join(self.names) or "none (set MCP_SERVERS_FILE)"
        return f"Unknown MCP server {name!r}; configured: {configured}."

    def _example(self) -> str:
        return f"{self.names[0]}__toolname" if self.names else "files__read"


def _shown(tool: types.Tool) -> str:
    description = tool.description or ""
    return f"({NEEDS_TASKS}) {description}".strip() if needs_tasks(tool) else description


def _arguments(raw: str | dict[str, Any] | None) -> tuple[dict[str, Any], str | None]:
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}, None
    if isinstance(raw, str):
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as exc:
            return {}, f"not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})."
    else:
        value = raw
    if not isinstance(value, dict):
        shown = cap_text(json.dumps(value), 200)
        return {}, f'must be a JSON object like {{"a": 1}}, not {shown}.'
    return value, None
