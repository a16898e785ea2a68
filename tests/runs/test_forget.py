"""A deleted conversation's sandboxes go on every process, not only the one that deleted it
(a queue worker keeps the docker sandbox of the conversations it ran). Two RunManagers on one
PostgreSQL stand for the API server and the worker."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import cast

import psycopg
import pytest

from backend.actions.model import Action
from backend.agent.specialists import BUILTIN
from backend.llm.testing import ScriptedLLM
from backend.runs import RunManager
from backend.runs.notify import psycopg_conninfo
from backend.runtime.base import ActionResult, Runtime
from backend.store.repo import CONTROL_CHANNEL, Store
from tests.pg import postgres_url, reset
from tests.support.runs import close
from tests.support.settings import make_settings


class ForgettingRuntime:
    """Records the workspaces it is told to forget (the docker runtime removes a sandbox)."""

    name = "docker"

    def __init__(self) -> None:
        self.forgotten: asyncio.Queue[Path] = asyncio.Queue()

    async def execute(self, action: Action, workspace: Path) -> ActionResult:
        raise AssertionError("not used")

    async def start(self) -> None: ...

    async def forget(self, workspace: Path) -> None:
        self.forgotten.put_nowait(workspace)

    async def reap_owners(self, owners: list[str]) -> int:
        return 0

    async def close(self) -> None: ...


async def process(tmp_path: Path, url: str, kind: str, runtime: Runtime) -> RunManager:
    """A RunManager as `planact serve` or `planact worker` makes it on PostgreSQL."""
    store = Store(url)
    store.migrate()
    settings = make_settings(tmp_path, database_url=url)
    m = RunManager.for_process(
        settings,
        store,
        ScriptedLLM([]),
        kind=kind,
        specialists=BUILTIN,
        runtimes={"docker": runtime},
    )
    await m.open()
    return m


async def two_managers(
    tmp_path: Path,
) -> tuple[RunManager, ForgettingRuntime, RunManager, ForgettingRuntime]:
    url = postgres_url()
    reset(url)
    held, own = ForgettingRuntime(), ForgettingRuntime()
    # the runtime's part the manager calls on forget and at start; the rest is never called
    worker = await process(tmp_path, url, "worker", cast(Runtime, held))
    server = await process(tmp_path, url, "serve", cast(Runtime, own))
    return worker, held, server, own


async def test_a_delete_on_one_process_drops_the_sandbox_another_process_holds(
    tmp_path: Path,
) -> None:
    worker, runtime, server, own = await two_managers(tmp_path)
    try:
        cid = await server.store.create_conversation("1", "t")
        other = await server.store.create_conversation("1", "kept")
        assert await server.delete_conversation("1", cid) is True
        # the deleting process dropped its own before answering
        assert own.forgotten.get_nowait() == server.workspace("1", cid)
        async with asyncio.timeout(10):
            forgotten = await runtime.forgotten.get()
        assert forgotten == worker.workspace("1", cid)
        # nothing else was dropped, and refusing to delete a missing one announces nothing
        assert await server.delete_conversation("1", cid) is False
        assert await server.delete_conversation("2", other) is False  # not that user's
        assert await server.store.get_conversation("1", other) is not None
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.5):
                await runtime.forgotten.get()
        # the deleting process heard its own announcement too, and did not drop them again
        assert own.forgotten.empty()
    finally:
        await close(server)
        await close(worker)


async def test_a_malformed_forget_notification_is_logged_and_the_listener_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    worker, runtime, server, _ = await two_managers(tmp_path)
    try:
        with caplog.at_level(logging.WARNING, logger="backend.runs.manager"):
            async with await psycopg.AsyncConnection.connect(
                psycopg_conninfo(postgres_url()), autocommit=True
            ) as conn:
                for bad in ("forget:not json", "forget:[1]", "forget:null"):
                    await conn.execute("SELECT pg_notify(%s, %s)", (CONTROL_CHANNEL, bad))
            cid = await server.store.create_conversation("1", "t")
            assert await server.delete_conversation("1", cid) is True
            async with asyncio.timeout(10):
                forgotten = await runtime.forgotten.get()
        assert forgotten == worker.workspace("1", cid)  # the good one after the bad ones
        warned = [r.getMessage() for r in caplog.records if "malformed forget" in r.getMessage()]
        assert len(warned) == 6, warned  # three, heard by each of the two processes
    finally:
        await close(server)
        await close(worker)
