"""Taking over a run whose owner died: whether it can go on, and why not.

The run goes on from its checkpoint (its RunState at its last step, backend/agent/resume.py)
on the process that took it (inline) or on a worker (queue); RUN_MAX_RESUMES bounds how often.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from backend.agent.context import RunContext
    from backend.config import Settings
    from backend.runs.executor import Executor
    from backend.store.repo import Store


class Host(Protocol):
    """What taking a run over needs of the process's run manager (runs/manager.py)."""

    kind: str
    instance_id: str
    settings: Settings
    store: Store
    executor: Executor
    requeue: Callable[[str], Awaitable[None]] | None

    def launch(self, run_id: str) -> asyncio.Task[str]: ...

    async def close_unexecuted(self, run_id: str, status: str, reason: str) -> bool: ...


NO_CHECKPOINT = (
    "The process running this run crashed or restarted before the run ended, and the run "
    "had no stored step to go on from, so it was interrupted. Send the goal again to continue."
)


def too_many_resumes(limit: int) -> str:
    return (
        f"The run was interrupted more than {limit} times (its process crashed, restarted or "
        f"shut down), so it was not resumed again (RUN_MAX_RESUMES={limit}). Send the goal "
        "again to continue, or raise RUN_MAX_RESUMES."
    )


async def take_over(m: Host, run_id: str, dead_owner: str) -> bool:
    """Continue a run whose owner died from its last checkpoint: in ``m``'s process
    (inline), or queued again for a worker (queue). Past RUN_MAX_RESUMES it is failed,
    saying why. False when another process took it first; a `planact run` leaves it to
    others (it ends when its own run does)."""
    if m.kind == "cli":
        return False
    submit = submitter(m)
    owner = m.instance_id if submit is None else None  # None: queued again
    resumes = await m.store.take_over(run_id, dead_owner, owner)
    if resumes is None:
        return False
    limit = m.settings.run_max_resumes
    reason = too_many_resumes(limit) if resumes > limit else ""
    reason = reason or await unresumable(m.store, run_id)
    if reason:
        if owner is not None or await m.store.claim_run(run_id, m.instance_id, None):
            await m.close_unexecuted(run_id, "failed", reason)
        return True
    if submit is None:
        m.launch(run_id)
    else:
        await submit(run_id)  # a worker claims it and goes on
    return True


def submitter(m: Host) -> Callable[[str], Awaitable[None]] | None:
    """Where a run this process goes on with is sent: None when it executes here (inline,
    `planact run`), else the queue (a worker's requeue, or the queue executor)."""
    return m.requeue or (None if m.executor.runs_here else m.executor.submit)


async def unresumable(store: Store, run_id: str) -> str:
    """Why a run cannot go on ("" when it can): a run with messages but no checkpoint
    (begun by a version before checkpoints) has no stored step to go on from."""
    run = await store.run_for_execution(run_id)
    if run is None or run.checkpoint:
        return ""
    if await store.messages(run.conversation_id, run_id=run_id, limit=1):
        return NO_CHECKPOINT
    return ""  # it had not begun: it begins now


async def last_stored(store: Store, ctx: RunContext) -> int:
    """The seq of the last message a taken-over run stored before (its checkpoint may be a
    message behind: it is stored with the message it precedes)."""
    state = ctx.state
    later = await store.messages(
        state.conversation_id, run_id=state.run_id, after=state.last_seq, limit=100_000
    )
    if later and later[-1].seq is not None:
        state.last_seq = later[-1].seq
    return state.last_seq
