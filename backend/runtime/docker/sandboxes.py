"""The sandboxes of one runtime: one per conversation workspace, started on first use,
reused, replaced when broken, removed when idle (the idle reaper), on forget and on close."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import anyio

from backend.runtime.base import RuntimeUnavailable
from backend.runtime.docker.containers import Containers, Sandbox
from backend.runtime.docker.engine import API_ERRORS, Engine, remove_container
from backend.runtime.docker.ownership import claim_workspace
from backend.runtime.docker.tasks import retrieve

if TYPE_CHECKING:
    from backend.config import Settings

log = logging.getLogger(__name__)

FRESH = "the next command starts in a fresh sandbox (files in the workspace are kept)"


def out_of_memory(limit: str, *, killed: bool) -> str:
    """The note of a command during which the sandbox ran out of memory (it is replaced);
    ``killed``: the command itself was OOM-killed."""
    if killed:
        return f"killed: out of memory (the sandbox is limited to {limit} of memory); {FRESH}"
    return f"the sandbox ran out of memory ({limit}) and a process was killed; {FRESH}"


class Sandboxes:
    def __init__(self, settings: Settings, engine: Engine, owner: str) -> None:
        self.settings = settings
        self.engine = engine
        self.containers = Containers(settings, owner)
        self.idle_timeout = settings.sandbox_idle_timeout
        self.by_key: dict[str, Sandbox] = {}
        self.closed = False
        self.creating: set[asyncio.Future[Sandbox]] = set()  # creations in flight
        self._created: set[str] = set()  # ids of containers made here and not removed yet
        self._locks: dict[str, asyncio.Lock] = {}
        self._owners: dict[str, tuple[int, int]] = {}  # workspace -> uid/gid of its commands
        self._reaper: asyncio.Task[None] | None = None

    def lock_for(self, key: str) -> asyncio.Lock:
        return self._locks.setdefault(key, asyncio.Lock())

    # ---- whose files -----------------------------------------------------------------

    async def claim(self, key: str) -> tuple[int, int]:
        """The uid/gid of the workspace ``key``'s commands (claimed once)."""
        if key not in self._owners:
            self._owners[key] = await anyio.to_thread.run_sync(claim_workspace, self.settings, key)
        return self._owners[key]

    def file_owner(self, key: str) -> tuple[int, int] | None:
        return self._owners.get(key)

    # ---- one sandbox -----------------------------------------------------------------

    async def acquire(self, key: str) -> Sandbox:
        """The sandbox of the workspace ``key``, started if needed, marked busy (the caller
        decrements ``busy`` and sets ``last_used`` when done)."""
        async with self.lock_for(key):
            sandbox = self.by_key.get(key)
            if sandbox is None:
                client = await self.engine.client()
                owner = await self.claim(key)
                if self.closed:
                    raise RuntimeUnavailable("the server is shutting down")

                def create() -> Sandbox:
                    made = self.containers.create(client, key, owner)
                    self._created.add(made.container_id)
                    return made

                # the creation goes on if we are cancelled: close() waits for it and removes
                # what it made
                creation = asyncio.ensure_future(anyio.to_thread.run_sync(create))
                self.creating.add(creation)
                creation.add_done_callback(self.creating.discard)
                creation.add_done_callback(retrieve)
                try:
                    sandbox = await asyncio.shield(creation)
                except RuntimeUnavailable:
                    raise
                except API_ERRORS as exc:
                    raise RuntimeUnavailable(f"could not start a sandbox container: {exc}") from exc
                if self.closed:
                    await self.drop(sandbox)
                    raise RuntimeUnavailable("the server is shutting down")
                self.by_key[key] = sandbox
                self._ensure_reaper()
            sandbox.busy += 1
            sandbox.last_used = time.monotonic()
            return sandbox

    async def drop(self, sandbox: Sandbox) -> None:
        """Forget ``sandbox`` and remove its container (the next command starts afresh)."""
        if sandbox.runner is not None:
            sandbox.runner.close()
            sandbox.runner = None
        if self.by_key.get(sandbox.key) is sandbox:
            del self.by_key[sandbox.key]
        client = self.engine.current
        if client is not None:
            with contextlib.suppress(*API_ERRORS):
                await anyio.to_thread.run_sync(remove_container, client, sandbox.container_id)
                self._created.discard(sandbox.container_id)

    async def post_mortem(self, sandbox: Sandbox, exec_id: str | None) -> tuple[int | None, str]:
        """A command ended without saying how: its exit code (of the exec ``exec_id``) and a
        note for the model; a sandbox that stopped is dropped."""
        client = await self.engine.client()

        def inspect() -> tuple[int | None, dict[str, Any] | None]:
            code: int | None = None
            if exec_id is not None:
                with contextlib.suppress(*API_ERRORS):
                    code = client.api.exec_inspect(exec_id).get("ExitCode")
            state: dict[str, Any] | None = None
            with contextlib.suppress(*API_ERRORS):
                state = client.api.inspect_container(sandbox.container_id)["State"]
            return code, state

        code, state = await anyio.to_thread.run_sync(inspect)
        if state is None or not state.get("Running"):
            await self.drop(sandbox)
            why = " (out of memory)" if state and state.get("OOMKilled") else ""
            return code, f"The sandbox container stopped{why} while the command ran; {FRESH}."
        if code == 137:
            # out of memory, maybe for good (a full /tmp): the next command gets a fresh one
            await self.drop(sandbox)
            return code, (
                "killed by SIGKILL: out of memory (the sandbox is limited to "
                f"{self.containers.limits.memory_words}), or by another process; {FRESH}"
            )
        return code, ""

    # ---- removal ---------------------------------------------------------------------

    async def forget(self, key: str) -> None:
        """The conversation of the workspace ``key`` was deleted: remove its sandbox."""
        async with self.lock_for(key):
            sandbox = self.by_key.pop(key, None)
            self._owners.pop(key, None)
            if sandbox is not None and sandbox.runner is not None:
                sandbox.runner.close()
                sandbox.runner = None
            client = self.engine.current
            if client is None:
                return
            also = sandbox.container_id if sandbox is not None else None
            try:
                await anyio.to_thread.run_sync(self.containers.remove_workspace, client, key, also)
            except API_ERRORS as exc:
                log.warning("docker runtime: could not remove the sandbox of %s: %s", key, exc)

    async def reap_orphans(self) -> int:
        """Remove the sandboxes left under our owner id or without one; start the reaper."""
        client = await self.engine.client()
        keep = {s.container_id for s in self.by_key.values()}
        removed = await anyio.to_thread.run_sync(self.containers.remove_orphans, client, keep)
        self._ensure_reaper()
        return removed

    async def reap_owners(self, owners: Iterable[str]) -> int:
        """Remove the sandboxes of the given (dead) owners, never ours; how many."""
        wanted = {o for o in owners if o and o != self.containers.owner}
        if not wanted:
            return 0
        client = await self.engine.client()
        return await anyio.to_thread.run_sync(self.containers.remove_owners, client, wanted)

    async def close(self) -> None:
        """Remove every sandbox this runtime started, those being created included; start
        none afterwards."""
        self.closed = True
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
            self._reaper = None
        if self.creating:  # a creation in flight ends with a container to remove
            await asyncio.wait(set(self.creating), timeout=120)
        sandboxes, self.by_key = list(self.by_key.values()), {}
        client = self.engine.take()
        if client is None:
            return
        ids = set(self._created)
        for sandbox in sandboxes:
            ids.add(sandbox.container_id)
            runner, sandbox.runner = sandbox.runner, None
            if runner is not None:
                runner.close()
                await anyio.to_thread.run_sync(runner.thread.join, 5)

        def remove_all() -> None:
            with contextlib.suppress(*API_ERRORS):
                ids.update(self.containers.owned(client))
            for container_id in ids:
                with contextlib.suppress(*API_ERRORS):
                    remove_container(client, container_id)
                self._created.discard(container_id)

        await anyio.to_thread.run_sync(remove_all)
        with contextlib.suppress(*API_ERRORS):
            client.close()

    # ---- the idle reaper -------------------------------------------------------------

    def _ensure_reaper(self) -> None:
        if self._reaper is None or self._reaper.done():
            self._reaper = asyncio.get_running_loop().create_task(
                self._reap_idle(), name="planact-sandbox-reaper"
            )

    async def _reap_idle(self) -> None:
        interval = max(0.05, min(30.0, self.idle_timeout / 4))
        while True:
            await asyncio.sleep(interval)
            for key, sandbox in list(self.by_key.items()):
                if sandbox.busy or time.monotonic() - sandbox.last_used < self.idle_timeout:
                    continue
                async with self.lock_for(key):
                    idle = time.monotonic() - sandbox.last_used >= self.idle_timeout
                    if self.by_key.get(key) is sandbox and not sandbox.busy and idle:
                        log.info("docker runtime: removing idle sandbox of %s", key)
                        try:
                            await self.drop(sandbox)
                        except Exception:  # keep reaping the others
                            log.exception("docker runtime: removing an idle sandbox failed")
