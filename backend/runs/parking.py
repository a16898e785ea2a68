"""The manager's side of runs that wait for a person (backend/waits): letting go of a run
that parked, resuming one that was answered, stopping one that waits, and the sweep every
live process runs (timeouts, and waits whose owner died before it let go)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol

from backend.runs.takeover import Host
from backend.waits.answers import Host as AnswerHost
from backend.waits.answers import expire_waits

log = logging.getLogger(__name__)


class RunManager(Host, AnswerHost, Protocol):
    """What parking needs of the process's run manager (backend/runs/manager.py)."""

    executing: bool  # its executor is started: answered runs can be resumed
    _tasks: dict[str, asyncio.Task[str]]  # the runs executing here
    _listeners: dict[str, Any]  # the runs started here (a `planact run`: its own)

    def _background(self, work: Coroutine[Any, Any, None]) -> None: ...


def answer_owner(m: RunManager) -> str | None:
    """Who runs a run answered in this process: this process (inline, `planact run`), or
    nobody yet (queued for a worker)."""
    return m.instance_id if _submit(m) is None else None


def _submit(m: RunManager) -> Callable[[str], Awaitable[None]] | None:
    return m.requeue or (None if m.executor.runs_here else m.executor.submit)


async def resume_answered(m: RunManager, run_id: str) -> None:
    """The answer took the run (``answer_owner``): execute it from its checkpoint."""
    submit = _submit(m)
    if submit is not None:
        await submit(run_id)
        return
    old = m._tasks.get(run_id)  # the task that parked it may still be letting go of it
    if old is None or old.done():
        m.launch(run_id)
        return

    async def after_old() -> None:
        await asyncio.wait({old})
        m.launch(run_id)

    m._background(after_old())


async def let_go(m: RunManager, run_id: str, uuid: str) -> None:
    """The run parked on ``uuid`` left this process: it has no owner from now on (unless
    it was answered meanwhile: then it is already someone's; or a stop came: it ends)."""
    stop = await m.store.release_parked(run_id, m.instance_id, uuid)
    if stop:
        await m.close_unexecuted(run_id, "stopped", "")


async def stop_parked(m: RunManager, run_id: str) -> bool:
    """A stop of a run parked with no owner: it ends here, its wait message failed."""
    if not await m.store.take_parked(run_id, m.instance_id):
        return False
    await m.close_unexecuted(run_id, "stopped", "")
    return True


async def sweep(m: RunManager) -> int:
    """Waits whose owner died before it let go: released (or ended, if stopped meanwhile);
    waits past APPROVAL_TIMEOUT: rejected, the run goes on (once this process can resume
    runs: its executor is started). Returns how many timed out."""
    for wait in await m.store.orphaned_waits():
        rid, dead = wait["run_id"], wait["owner"]
        if await m.store.release_parked(rid, dead, wait["uuid"]) and await m.store.take_parked(
            rid, m.instance_id, dead
        ):
            await m.close_unexecuted(rid, "stopped", "")
    if not m.executing:
        return 0
    # a `planact run` times out only its own run (it takes no other process's run)
    return await expire_waits(m, set(m._listeners) if m.kind == "cli" else None)
