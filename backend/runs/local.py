"""The runs of this process: one record per run, made in one place (``LocalRuns.enter``)
and dropped in one (``LocalRuns.leave``), and how they are stopped or handed over.

A run's record lives while the run is this process's to execute: from its start here (or
its launch, or its execution by a queue worker) until its execution is over, whichever way
it ends (finished, failed, stopped, parked on a wait, handed over, taken over elsewhere).
Who follows a run started here (its listeners: a `planact run`'s terminal) is kept apart,
for the run's whole life: a run that waited for a person goes on in a new execution and
reports to the same listeners.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from backend.agent.context import RunContext
    from backend.agent.control import RunControl
    from backend.agent.live import DeltaSink
    from backend.agent.publisher import Listener
    from backend.store.rows import RunToExecute

log = logging.getLogger(__name__)
CANCEL_REPEAT = 0.2  # seconds between repeated cancellations of a run that must stop


class Followers(NamedTuple):
    """Who follows a run started in this process: every message, and the live deltas."""

    listener: Listener | None = None
    delta_listener: DeltaSink | None = None


@dataclass(eq=False)
class LocalRun:
    """One run of this process."""

    run_id: str
    # started here: its row as written, read when it begins (no read back from the store)
    row: RunToExecute | None = None
    task: asyncio.Task[str] | None = None  # the task executing it
    context: RunContext | None = None  # from its context's making to its end here
    started: bool = False  # its pipeline runs: a stop cancels the task
    canceller: asyncio.Task[None] | None = None  # cancels it again and again until it ends

    @property
    def control(self) -> RunControl | None:
        return self.context.control if self.context is not None else None


class LocalRuns:
    """The runs of this process by id, and what a run that begins from now on is told:
    ``handing_over`` (SIGTERM: handed over at its next step), ``shutting_down`` (past the
    grace of a `planact run`: it stops at once)."""

    def __init__(self) -> None:
        self._runs: dict[str, LocalRun] = {}
        self._followers: dict[str, Followers] = {}
        self.handing_over = False
        self.shutting_down = False

    # -- the records ---------------------------------------------------------------------
    def enter(self, run_id: str) -> LocalRun:
        """The run's record: the one it has, or a new one (the only place one is made)."""
        record = self._runs.get(run_id)
        if record is None:
            record = self._runs[run_id] = LocalRun(run_id)
        return record

    def leave(self, record: LocalRun) -> None:
        """The run's execution here is over: its record is dropped (the only place one is),
        its canceller with it. A record a newer one replaced is left alone."""
        if self._runs.get(record.run_id) is record:
            del self._runs[record.run_id]
        record.context, record.started = None, False
        canceller, record.canceller = record.canceller, None
        if canceller is not None and canceller is not asyncio.current_task():
            canceller.cancel()

    def get(self, run_id: str) -> LocalRun | None:
        return self._runs.get(run_id)

    def task(self, run_id: str) -> asyncio.Task[str] | None:
        """The task executing the run here (None: none)."""
        record = self._runs.get(run_id)
        return record.task if record is not None else None

    def __contains__(self, run_id: object) -> bool:
        return run_id in self._runs

    def __len__(self) -> int:
        return len(self._runs)

    def controls(self) -> dict[str, RunControl]:
        """The runs executing in this process (their context is made), by id."""
        return {rid: r.context.control for rid, r in self._runs.items() if r.context is not None}

    def active(self) -> list[asyncio.Task[str]]:
        """The tasks of the runs executing here that have not ended."""
        return [r.task for r in self._runs.values() if r.task is not None and not r.task.done()]

    # -- who follows a run started here --------------------------------------------------
    def follow(self, run_id: str, followers: Followers) -> None:
        self._followers[run_id] = followers

    def followers(self, run_id: str) -> Followers:
        return self._followers.get(run_id) or Followers()

    def unfollow(self, run_id: str) -> None:
        """The run ended (not parked): nobody here follows it any more."""
        self._followers.pop(run_id, None)

    def followed(self) -> set[str]:
        """The runs started here that someone follows (a `planact run`: its own)."""
        return set(self._followers)

    # -- stopping ------------------------------------------------------------------------
    def stop(self, run_id: str, *, lost: bool = False) -> None:
        """Stop a run of this process: raise its flag and cancel its task again and again
        until it has ended (a swallowed cancellation cannot lose a stop). ``lost``: another
        process ended it (nothing more is published here)."""
        record = self._runs.get(run_id)
        if record is None or record.context is None:
            return
        control = record.context.control
        control.stop_requested = True
        if lost:
            control.lost = True
        self._cancel(record, "stop")

    def _cancel(self, record: LocalRun, why: str) -> None:
        if record.canceller is None and record.context is not None:
            record.canceller = asyncio.create_task(
                _cancel_until_done(record, record.context.control), name=f"{why}-{record.run_id}"
            )

    async def hand_over(self, grace: float) -> None:
        """SIGTERM: every run is handed over at its next step boundary, within ``grace``
        seconds; past it, interrupted where it is. Returns once all have left."""
        self.handing_over = True
        for record in self._runs.values():
            if record.context is not None:
                record.context.control.handing_over = True
        tasks = self.active()
        if tasks and grace > 0:
            log.warning("shutting down: handing %d active run(s) over", len(tasks))
            await asyncio.wait(tasks, timeout=grace)
        for record in list(self._runs.values()):
            if record.task is not None and not record.task.done():
                self._cancel(record, "hand-over")
        if remaining := self.active():
            await asyncio.wait(remaining)

    async def stop_all(self, grace: float) -> None:
        """A `planact run` shuts down: its runs go on up to ``grace`` seconds, then stop
        (as shut down); a run that begins from now on stops at once."""
        tasks = self.active()
        if tasks and grace > 0:
            log.warning("shutting down: %d active run(s), %.0f s to finish", len(tasks), grace)
            await asyncio.wait(tasks, timeout=grace)
        self.shutting_down = True
        for record in list(self._runs.values()):
            if record.task is not None and not record.task.done():
                if record.context is not None:
                    record.context.control.shutting_down = True
                self.stop(record.run_id)
        if remaining := self.active():
            await asyncio.wait(remaining)


async def _cancel_until_done(record: LocalRun, control: RunControl) -> None:
    while True:
        task = record.task
        if task is None or task.done():
            return
        if record.started and not control.ending:
            task.cancel()
        await asyncio.wait({task}, timeout=CANCEL_REPEAT)
