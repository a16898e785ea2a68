"""The manager's side of runs that wait for a person (backend/waits): letting go of a run
that parked, resuming one that was answered, stopping one that waits, and the sweep every
live process runs (timeouts, and waits whose owner died before it let go)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any, Protocol

from backend.runs.local import LocalRuns
from backend.runs.takeover import Host, submitter
from backend.store.rows import RecoveryScan
from backend.waits.answers import Host as AnswerHost
from backend.waits.answers import expire_waits

log = logging.getLogger(__name__)


class ParkingHost(Host, AnswerHost, Protocol):
    """What parking needs of the process's run manager (backend/runs/manager.py): its
    public side, beside taking over (``Host``) and answering (``AnswerHost``)."""

    executing: bool  # its executor is started: answered runs can be resumed
    runs: LocalRuns  # the runs of this process

    def background(self, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` on its own (the manager holds it until it is done)."""


def answer_owner(m: ParkingHost) -> str | None:
    """Who runs a run answered in this process: this process (inline, `planact run`), or
    nobody yet (queued for a worker)."""
    return m.instance_id if submitter(m) is None else None


async def resume_answered(m: ParkingHost, run_id: str) -> None:
    """The answer took the run (``answer_owner``): execute it from its checkpoint."""
    submit = submitter(m)
    if submit is not None:
        await submit(run_id)
        return
    old = m.runs.task(run_id)  # the task that parked it may still be letting go of it
    if old is None or old.done():
        m.launch(run_id)
        return

    async def after_old() -> None:
        await asyncio.wait({old})
        m.launch(run_id)

    m.background(after_old())


async def let_go(m: ParkingHost, run_id: str, uuid: str) -> None:
    """The run parked on ``uuid`` left this process: it has no owner from now on (unless
    it was answered meanwhile: then it is already someone's; or a stop came: it ends)."""
    stop = await m.store.release_parked(run_id, m.instance_id, uuid)
    if stop:
        await m.close_unexecuted(run_id, "stopped", "")


async def stop_parked(m: ParkingHost, run_id: str) -> bool:
    """A stop of a run parked with no owner: it ends here, its wait message failed."""
    if not await m.store.take_parked(run_id, m.instance_id):
        return False
    await m.close_unexecuted(run_id, "stopped", "")
    return True


async def sweep(m: ParkingHost, scan: RecoveryScan) -> int:
    """Of a recovery round's ``scan``: waits whose owner died before it let go, released
    (or ended, if stopped meanwhile); waits past APPROVAL_TIMEOUT, rejected, the run goes
    on (once this process can resume runs: its executor is started). Returns how many
    timed out."""
    for wait in scan.orphaned_waits:
        rid, dead = wait.run_id, wait.owner
        if await m.store.release_parked(rid, dead, wait.uuid) and await m.store.take_parked(
            rid, m.instance_id, dead
        ):
            await m.close_unexecuted(rid, "stopped", "")
    if not m.executing:
        return 0
    # a `planact run` times out only its own run (it takes no other process's run)
    followed = m.runs.followed() if m.kind == "cli" else None
    return await expire_waits(m, followed, scan.expired_waits)
