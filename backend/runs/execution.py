"""Executing a run in this process to its end: taking it (a queued run) or refusing it
(another's, or ended), its context, the pipeline under the run's metrics and log context, and
what its end leaves to this process (backend/runs/manager.py starts and stops runs)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from backend.agent.context import RunContext
from backend.agent.outcomes import Outcome
from backend.agent.pipeline import HANDED_OVER, PARKED, run_pipeline
from backend.checkpoints.run import RunCheckpoints
from backend.logctx import bind as log_context
from backend.runs import parking
from backend.runs.begin import build_context
from backend.runs.local import LocalRun
from backend.runs.observed import observed_run
from backend.runs.parking import ParkingHost
from backend.runs.takeover import last_stored
from backend.runs.waiting import uncancellable

if TYPE_CHECKING:
    from backend.actions.registry import Registry
    from backend.agent.specialists import Specialist
    from backend.checkpoints import Checkpoints
    from backend.checkpoints.gitrepo import GitRepo
    from backend.llm.base import LLM
    from backend.runs.notify import Notifier
    from backend.runtime.base import Runtime
    from backend.tools.kit import Tools


class ExecutionHost(ParkingHost, Protocol):
    """What executing a run needs of the process's run manager (backend/runs/manager.py)."""

    notifier: Notifier
    llm: LLM
    tools: Tools
    actions: Registry
    specialists: tuple[Specialist, ...]
    checkpoints: Checkpoints

    def runtime(self, name: str) -> Runtime: ...

    def workspace(self, user_id: str, conversation_id: str) -> Path: ...

    def checkpoint_repo(self, user_id: str, conversation_id: str) -> GitRepo: ...


async def execute_record(m: ExecutionHost, record: LocalRun) -> str:
    """Execute the run of ``record`` here to its end (``RunManager.execute``): take it if it is
    queued, refuse it if another instance owns it or it already ended. Returns its final
    status, or how it goes on elsewhere (an ``Outcome``)."""
    run_id, row, record.row = record.run_id, record.row, None
    run = row or await m.store.run_for_execution(run_id)
    if run is None or run.status != "running":
        return run.status if run else Outcome.MISSING
    if run.owner is None:
        if not await m.store.claim_run(run_id, m.instance_id, None):
            return Outcome.TAKEN
        run = await m.store.run_for_execution(run_id)
        if run is None:
            return Outcome.MISSING
    elif run.owner != m.instance_id:
        return Outcome.TAKEN
    user_id, cid = run.user_id, run.conversation_id
    followers = m.runs.followers(run_id)  # (kept while the run waits: parked)
    ctx = await build_context(
        run,
        settings=m.settings,
        store=m.store,
        notifier=m.notifier,
        llm=m.llm,
        runtime=m.runtime(run.runtime),
        tools=m.tools,
        actions=m.actions,
        workspace=m.workspace(user_id, cid),
        shutting_down=m.runs.shutting_down,
        listener=followers.listener,
        delta_listener=followers.delta_listener,
        owner=m.instance_id,
    )
    ctx.control.handing_over = m.runs.handing_over
    ctx.checkpoints = RunCheckpoints(m.checkpoints, m.checkpoint_repo(user_id, cid), cid, run_id)
    record.context = ctx
    floor = await last_stored(m.store, ctx) if ctx.resumed else 0
    m.bus.mark_live(run_id, floor, in_flight=ctx.live)
    if record.task is None:  # a queue worker's job
        record.task = asyncio.current_task()
    logged = log_context(run_id=run_id, conversation_id=cid, user=user_id)
    try:  # with its metrics and, if traced, under the run's trace
        return await observed_run(m.store, run, ctx, _drive(m, record, ctx))
    finally:
        logged.reset()


async def _drive(m: ExecutionHost, record: LocalRun, ctx: RunContext) -> str:
    """The pipeline, then what its end leaves to this process: the run's last checkpoint,
    letting go of a run that parked, storing the final status of one that ended here."""
    status = "failed"
    ended: str | None = None  # the final status this process stored, if it did
    record.started = True
    try:
        status = await run_pipeline(ctx, m.specialists)
    finally:
        ctx.live.close()  # no timer of the run's deltas outlives it
        # the end is ours to store: the lease keeper's watch must not read the stored
        # end as one from elsewhere while the run has not left this process yet
        ctx.control.ending = True
        try:
            if ctx.checkpoints is not None:  # the last action's, then the run's end
                if ctx.control.lost or status in (PARKED, HANDED_OVER):
                    await uncancellable(ctx.checkpoints.settle())
                else:
                    await uncancellable(ctx.checkpoints.end_of_run(ctx.state.last_seq))
            if status == PARKED and ctx.state.wait is not None:
                await uncancellable(parking.let_go(m, ctx.run_id, ctx.state.wait.uuid))
            elif not ctx.control.lost and status != HANDED_OVER:
                error = ""
                if ctx.control.shutting_down:
                    error = "The server shut down while this run was active."
                if await uncancellable(
                    m.store.end_run(ctx.run_id, status, error, owner=m.instance_id)
                ):
                    ended = status
        finally:
            if status != PARKED:
                m.runs.unfollow(ctx.run_id)
            m.bus.mark_done(ctx.run_id, ended)
    return status
