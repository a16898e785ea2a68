"""The previews a process hosts (a service is not a command: it outlives the action and the run).

:class:`PreviewHost` starts a preview's service in a conversation's sandbox (the runtime's
``start_service``), waits until its port accepts connections, and keeps it in the store
(``previews`` rows: any process lists them, the preview origin finds a token's service).
Its watcher stops a service after ``PREVIEW_IDLE_SECONDS`` without a request, at
``PREVIEW_MAX_SECONDS``, when its conversation is deleted (the row is gone) or when another
process asks (``stop_requested``); the process's end stops them all, and a dead process's
services die with it (the reaper's parent-death signal) and read as ``stopped``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from backend.previews.links import links_of, new_token
from backend.previews.service import Service
from backend.previews.sockets import remove_dir, socket_dir_beneath
from backend.runtime import confined
from backend.runtime.limits.budget import COST_SHARE, MB
from backend.store.rows import StoredPreview
from backend.store.tables import utcnow

if TYPE_CHECKING:
    from backend.config import Settings
    from backend.runtime.base import OutputCallback
    from backend.store.repo import Store

log = logging.getLogger(__name__)

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,39}$")
LIVE = ("starting", "ready")
FAILURE_LINES = 30  # of a failed service's output, in the action's failure


class ServiceRuntime(Protocol):
    name: str

    async def start_service(
        self, workspace: Path, command: str, port: int, socket_dir: Path
    ) -> Any: ...


@dataclass
class Started:
    ok: bool
    content: str
    data: list[dict[str, Any]] = field(default_factory=list)


def owners_of(workspace: Path) -> tuple[str, str]:
    """(user id, conversation id) of a conversation workspace (backend/workspace.py)."""
    return workspace.parent.name.removeprefix("user_"), workspace.name.removeprefix("Conversation_")


class PreviewHost:
    def __init__(self, settings: Settings, store: Store, instance_id: str) -> None:
        self.settings = settings
        self.store = store
        self.instance_id = instance_id
        self.services: dict[str, Service] = {}  # by row id
        self.conversations: dict[str, str] = {}  # row id -> conversation id
        self.workspaces: dict[str, Path] = {}  # row id -> its sandbox's workspace
        self._measured: dict[Path, tuple[float, float]] = {}  # workspace -> (at, cost)
        self._lock = asyncio.Lock()
        self._watcher: asyncio.Task[None] | None = None
        root = settings.preview_socket_dir or Path(tempfile.gettempdir()) / (
            f"planact-pv-{os.getuid()}"
        )
        self.socket_root = Path(root)
        # called before a service starts (`planact run` starts its preview listener then)
        self.on_start: Callable[[], Awaitable[object]] | None = None

    def url(self, row: StoredPreview) -> str:
        return links_of(self.settings).link(row.token, row.path)

    def entry(self, row: StoredPreview) -> dict[str, Any]:
        return {"name": row.name, "port": row.port, "path": row.path, "url": self.url(row)}

    def _lasting(self, row: StoredPreview) -> bool:
        """Whether a row's token works for at least half of PREVIEW_TOKEN_TTL more."""
        ttl = timedelta(seconds=self.settings.preview_token_ttl)
        return row.token_expires - utcnow() >= ttl / 2

    async def fresh(self, row: StoredPreview) -> StoredPreview:
        """``row`` with a token that works for at least half of PREVIEW_TOKEN_TTL."""
        if self._lasting(row):
            return row
        ttl = timedelta(seconds=self.settings.preview_token_ttl)
        token, expires = new_token(), utcnow() + ttl
        await self.store.update_preview(row.id, token=token, token_expires=expires)
        return replace(row, token=token, token_expires=expires)

    async def rows(self, cid: str) -> list[StoredPreview]:
        """The conversation's services as stored, those hosted here with their live state."""
        rows = await self.store.previews_of(cid)
        for i, row in enumerate(rows):
            service = self.services.get(row.id)
            if service is not None:
                rows[i] = replace(row, state=service.state)
        return rows

    def log_of(self, row: StoredPreview) -> list[str]:
        """A service's last lines of output (live when hosted here)."""
        service = self.services.get(row.id)
        return list(service.log) if service is not None else list(row.log or [])

    async def files_row(self, user_id: str, cid: str) -> StoredPreview:
        """The conversation's static-pages preview (its token), made on first use."""
        for row in await self.store.previews_of(cid, kind="files"):
            return await self.fresh(row)
        now = utcnow()
        return await self.store.put_preview(
            {
                "conversation_id": cid,
                "user_id": user_id,
                "kind": "files",
                "name": "",
                "state": "ready",
                "token": new_token(),
                "token_expires": now + timedelta(seconds=self.settings.preview_token_ttl),
                "started_at": now,
                "last_request_at": now,
                "log": [],
            }
        )

    # -- starting --------------------------------------------------------------------------
    async def start(
        self,
        runtime: ServiceRuntime,
        workspace: Path,
        *,
        name: str,
        port: int,
        path: str,
        command: str,
        on_output: OutputCallback | None = None,
    ) -> Started:
        user_id, cid = owners_of(workspace)
        if self.on_start is not None:
            await self.on_start()
        async with self._lock:
            rows = await self.rows(cid)
            live = [r for r in rows if r.state in LIVE and r.name != name]
            if len(live) >= self.settings.preview_max_per_conversation:
                names = ", ".join(f"{r.name} (port {r.port})" for r in live)
                return Started(
                    False,
                    f"At most {self.settings.preview_max_per_conversation} previews run at once "
                    f"in a conversation; running: {names}. Stop one (or reuse its name) first.",
                )
            mine = await self.store.live_previews_of_user(user_id)
            others = [r for r in mine if not (r.conversation_id == cid and r.name == name)]
            if len(others) >= self.settings.preview_max_per_user:
                names = ", ".join(f"{r.name} (port {r.port})" for r in others)
                return Started(
                    False,
                    f"At most {self.settings.preview_max_per_user} previews run at once for "
                    f"one person, across their conversations (PREVIEW_MAX_PER_USER); running: "
                    f"{names}. Stop one first.",
                )
            same = [r for r in rows if r.name == name]
            for row in same:
                await self._stop_row(row, "restarted")
            # a restart keeps the preview's address: links in the transcript keep working
            kept = next((r for r in same if self._lasting(r)), None)
            trusted: str | None = None
            try:
                if hasattr(runtime, "service_socket_root"):  # a folder the sandbox sees
                    trusted = os.path.realpath(workspace)
                    socket_dir = socket_dir_beneath(Path(trusted))
                else:
                    self.socket_root.mkdir(mode=0o700, parents=True, exist_ok=True)
                    socket_dir = Path(tempfile.mkdtemp(dir=self.socket_root))
            except OSError as exc:
                return Started(False, f"The service could not start: {exc}")
            now = utcnow()
            try:  # a preview may be a new conversation's first action
                await anyio.to_thread.run_sync(lambda: workspace.mkdir(parents=True, exist_ok=True))
                process = await runtime.start_service(workspace, command, port, socket_dir)
            except Exception as exc:
                remove_dir(socket_dir, trusted)
                return Started(False, f"The service could not start: {exc}")
            service = Service(process, socket_dir, self.settings.preview_log_lines, trusted)
            service.on_output = on_output
            row = await self.store.put_preview(
                {
                    "conversation_id": cid,
                    "user_id": user_id,
                    "kind": "service",
                    "name": name,
                    "port": port,
                    "path": path,
                    "command": command,
                    "runtime": runtime.name,
                    "state": "starting",
                    "owner": self.instance_id,
                    "socket": str(service.data_socket),
                    "token": kept.token if kept else new_token(),
                    "token_expires": kept.token_expires
                    if kept
                    else now + timedelta(seconds=self.settings.preview_token_ttl),
                    "started_at": now,
                    "last_request_at": now,
                    "stop_requested": False,
                    "log": [],
                }
            )
            self.services[row.id] = service
            self.conversations[row.id] = cid
            self.workspaces[row.id] = workspace
            self._watch()
        problem = await service.wait_ready(self.settings.preview_start_timeout)
        service.on_output = None
        if problem is not None:
            await self._end(row.id, "failed")
            tail = "\n".join(list(service.log)[-FAILURE_LINES:]) or "(no output)"
            return Started(False, f"{problem}\nCommand: {command}\nLast output:\n{tail}")
        await self.store.update_preview(row.id, state="ready", log=list(service.log))
        url = self.url(row)
        return Started(
            True,
            f"Preview {name!r} is ready at {url} (port {port} in the sandbox). The person can "
            "open it; it keeps running after this action.",
            [self.entry(row)],
        )

    async def existing(self, workspace: Path, port: int) -> StoredPreview | None:
        """The conversation's live service on ``port`` (a preview without a command)."""
        _, cid = owners_of(workspace)
        for row in await self.rows(cid):
            if row.port == port and row.state in LIVE:
                return row
        return None

    # -- stopping --------------------------------------------------------------------------
    async def _end(self, row_id: str, state: str, why: str = "") -> None:
        service = self.services.get(row_id)
        if service is None:
            return
        if why:  # a stopped one says why (docs/api.md "Previews")
            service.log.append(f"Stopped: {why}.")
        await service.stop(state)  # listed with its live state until it is gone
        self.services.pop(row_id, None)
        self.conversations.pop(row_id, None)
        self.workspaces.pop(row_id, None)
        remove_dir(service.socket_dir, service.trusted)
        with contextlib.suppress(Exception):
            await self.store.update_preview(
                row_id,
                state="failed" if state == "failed" else service.state,
                log=list(service.log),
            )

    async def _stop_row(self, row: StoredPreview, why: str = "stopped by the person") -> None:
        if row.id in self.services:
            await self._end(row.id, "stopped", why)
        elif row.state in LIVE:
            await self.store.update_preview(row.id, stop_requested=True)

    async def stop(self, cid: str, name: str) -> StoredPreview | None:
        """Stop a conversation's service (here, or asked of its owner); its row, or None."""
        for row in await self.rows(cid):
            if row.name == name:
                await self._stop_row(row)
                if row.id not in self.services and row.state in LIVE:
                    await self._wait_stopped(cid, name)
                return row
        return None

    async def _wait_stopped(self, cid: str, name: str, within: float = 10.0) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(within):
                while True:
                    rows = [r for r in await self.rows(cid) if r.name == name]
                    if not rows or rows[0].state not in LIVE:
                        return
                    await asyncio.sleep(0.2)  # another process's watcher acts on the row

    async def forget(self, cid: str) -> None:
        """The conversation was deleted: stop its services hosted here."""
        for row_id, owner in list(self.conversations.items()):
            if owner == cid:
                await self._end(row_id, "stopped", "its conversation was deleted")

    async def wait_all(self) -> None:
        """Return once no service runs here any more."""
        while self.services:
            await asyncio.wait({s.exited for s in self.services.values()})
            await self.sweep()  # drops the exited ones

    async def close(self, why: str = "the server that ran it stopped") -> None:
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(BaseException):
                await self._watcher
        for row_id in list(self.services):
            await self._end(row_id, "stopped", why)

    # -- the watcher -----------------------------------------------------------------------
    def _watch(self) -> None:
        if self._watcher is None or self._watcher.done():
            self._watcher = asyncio.create_task(self._watch_loop())

    @property
    def watch_every(self) -> float:
        return max(0.05, min(1.0, self.settings.preview_idle_seconds / 4))

    async def _watch_loop(self) -> None:
        while self.services:
            await asyncio.sleep(self.watch_every)
            try:
                await self.sweep()
            except Exception:
                log.exception("the previews' watcher failed")

    async def sweep(self) -> None:
        """One look at the services hosted here: stop those whose time is up or whose
        conversation is gone, store the others' state and output."""
        rows = {r.id: r for r in await self.store.previews_owned(self.instance_id)}
        now = utcnow()
        idle = timedelta(seconds=self.settings.preview_idle_seconds)
        oldest = timedelta(seconds=self.settings.preview_max_seconds)
        for row_id, service in list(self.services.items()):
            row = rows.get(row_id)
            if row is None or row.stop_requested:
                reason = "its conversation was deleted" if row is None else "stopped by the person"
            elif now - row.last_request_at > idle:
                reason = f"idle for {idle.total_seconds():g} s (PREVIEW_IDLE_SECONDS)"
            elif now - row.started_at > oldest:
                reason = f"its maximum age, {oldest.total_seconds():g} s (PREVIEW_MAX_SECONDS)"
            elif service.exited.done():
                reason = f"its process ended (exit code {service.exited.result()})"
            elif over := await self._over_budget(row_id):
                reason = over
                log.info("preview %s stopped: %s", row_id, reason)
                await self._end(row_id, "failed", over)
                continue
            else:
                if list(service.log) != row.log or service.state != row.state:
                    await self.store.update_preview(
                        row_id, log=list(service.log), state=service.state
                    )
                continue
            log.info("preview %s stopped: %s", row_id, reason)
            await self._end(row_id, "stopped", reason)

    async def _over_budget(self, row_id: str) -> str | None:
        """Why a service must stop for the workspace budget (WORKSPACE_MAX_MB holds while a
        service runs as while a command does, backend/runtime/limits/budget.py), or None.
        A workspace is measured at most once a sweep, and less often when measuring is
        costly (at most a tenth of the time)."""
        workspace = self.workspaces.get(row_id)
        if workspace is None:
            return None
        at, cost = self._measured.get(workspace, (0.0, 0.0))
        now = time.monotonic()
        if now - at < cost * COST_SHARE:
            return None
        used = await anyio.to_thread.run_sync(confined.usage, workspace)
        self._measured[workspace] = (now, time.monotonic() - now)
        limit = int(self.settings.workspace_max_mb * MB)
        if used <= limit:
            return None
        return (
            f"the workspace grew to {used / MB:.1f} MB while the service ran, past its limit "
            f"of {limit / MB:g} MB (WORKSPACE_MAX_MB)"
        )


def clean_name(name: str | None, port: int) -> str | None:
    """A preview's name: the given one if it is a valid name, else None; ``app-<port>`` by
    default."""
    if not name:
        return f"app-{port}"
    return name if NAME.match(name) else None
