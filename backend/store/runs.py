"""Runs and their tasks: start, read, end (one active run per conversation)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, TypeVar, cast

from sqlalchemy import Connection, Update, bindparam, case, func, insert, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from backend.messages.tasks import PlanTask, TaskStatus
from backend.observe import metrics
from backend.store.base import (
    ACTIVE,
    CONVERSATIONS,
    MESSAGE_CHANNEL,
    RUNS,
    TASKS,
    ConflictError,
    NotFoundError,
    RestoringError,
    StoreBase,
    fenced_update,
    iso,
    new_id,
    update_running,
)
from backend.store.parked import WAITING
from backend.store.rows import RunToExecute
from backend.store.shapes import RunRow, RunWait
from backend.store.tables import Conversation, Run, Task, utcnow

# a run's fields written with its next checkpoint (RunContext.store_with_next_checkpoint)
RUN_FIELDS = frozenset({"start_files", "task_type"})


def run_values(checkpoint: str | None, run_fields: Mapping[str, str] | None) -> dict[str, str]:
    """The run row's values a checkpoint write sets: the checkpoint and ``run_fields``."""
    values = dict(run_fields or {})
    unknown = set(values) - RUN_FIELDS
    if unknown:
        raise ValueError(f"not a run field written with a checkpoint: {sorted(unknown)}")
    if checkpoint is not None:
        values["checkpoint"] = checkpoint
    return values


# a run's start, built once (a statement made per call costs more to build than to run)
_NEW_CONVERSATION = insert(CONVERSATIONS)
_NEW_RUN = insert(RUNS)
_MARK_RUNNING = (
    update(CONVERSATIONS)
    .where(
        CONVERSATIONS.c.id == bindparam("cid"),
        CONVERSATIONS.c.user_id == bindparam("uid"),
        # not while a rewind puts its files back (restoring_until: that rewind's lease)
        or_(
            CONVERSATIONS.c.restoring_until.is_(None),
            CONVERSATIONS.c.restoring_until <= bindparam("now"),
        ),
    )
    .values(
        status=ACTIVE,
        updated_at=bindparam("now"),
        # a conversation with no title yet is named by its first goal
        title=case((CONVERSATIONS.c.title == "", bindparam("title")), else_=CONVERSATIONS.c.title),
    )
)
_OWNED = select(CONVERSATIONS.c.id).where(
    CONVERSATIONS.c.id == bindparam("cid"), CONVERSATIONS.c.user_id == bindparam("uid")
)
_ACTIVE_RUNS = select(func.count()).where(
    RUNS.c.conversation_id == bindparam("cid"), RUNS.c.status == ACTIVE
)


def _end_run(fenced: bool) -> Update:
    """A running run's end (with ``fenced``: only while ``:fence`` owns it)."""
    q = update(RUNS).where(RUNS.c.id == bindparam("run_id"), RUNS.c.status == ACTIVE)
    if fenced:
        q = q.where(RUNS.c.owner == bindparam("fence"))
    ended: dict[str, Any] = {
        "status": bindparam("v_status"),
        "error": bindparam("v_error"),
        "ended_at": bindparam("now"),
        "wait_uuid": None,
        "wait_kind": None,
        "wait_until": None,
    }
    return q.values(ended).returning(RUNS.c.conversation_id)


_END_RUN = {fenced: _end_run(fenced) for fenced in (False, True)}
_END_CONVERSATION = (
    update(CONVERSATIONS)
    .where(CONVERSATIONS.c.id == bindparam("cid"))
    .values(status=bindparam("v_status"), updated_at=bindparam("now"))
)


class SqlRuns(StoreBase):
    """Runs and their tasks."""

    # -- runs -----------------------------------------------------------------------------
    async def start_run(
        self,
        user_id: str,
        cid: str,
        goal: str,
        mode: str,
        runtime: str,
        owner: str | None = None,
        model: str = "",
        mcp_servers: list[str] | None = None,
        approval: str = "never",
        can_ask: bool = True,
        *,
        title: str = "",
        new_conversation: bool = False,
    ) -> str:
        """Create a run owned by ``owner`` (None: queued for a worker); raises ConflictError
        if one is active (the partial unique index decides across processes),
        NotFoundError if no conversation. ``title``: the conversation's, if it has none yet
        (a conversation made empty, to upload files first, is named by its first goal).
        ``new_conversation``: make the conversation ``cid`` too, in the same transaction."""
        rid = new_id()

        def fn(c: Connection) -> str:
            now = utcnow()
            if new_conversation:  # nothing can run in it yet: no check needed
                c.execute(
                    _NEW_CONVERSATION,
                    {"id": cid, "user_id": user_id, "title": title[:200], "status": ACTIVE}
                    | {"last_seq": 0, "created_at": now, "updated_at": now},
                )
            else:
                # marks the conversation running and takes its row's lock (PostgreSQL)
                # before the check for a live run: one statement for SELECT … FOR UPDATE
                # and UPDATE
                found = c.execute(
                    _MARK_RUNNING, {"cid": cid, "uid": user_id, "now": now, "title": title[:200]}
                ).rowcount
                if not found:
                    if c.execute(_OWNED, {"cid": cid, "uid": user_id}).first() is not None:
                        raise RestoringError(cid)
                    raise NotFoundError(cid)
                if c.execute(_ACTIVE_RUNS, {"cid": cid}).scalar():
                    raise ConflictError(cid)
            c.execute(
                _NEW_RUN,
                {
                    "id": rid,
                    "conversation_id": cid,
                    "goal": goal,
                    "mode": mode,
                    "runtime": runtime,
                    "owner": owner,
                    "stop_requested": False,
                    "model": model,
                    "mcp_servers": None if mcp_servers is None else json.dumps(mcp_servers),
                    "approval": approval,
                    "can_ask": can_ask,
                    "created_at": now,
                },
            )
            return rid

        try:
            return await self._quick(fn)
        except IntegrityError as exc:  # another process's run won the race
            raise ConflictError(cid) from exc

    async def get_run(self, run_id: str, user_id: str | None = None) -> RunRow | None:
        def fn(s: Session) -> RunRow | None:
            run = s.get(Run, run_id)
            if run is None:
                return None
            if user_id is not None:
                conv = s.get(Conversation, run.conversation_id)
                if conv is None or conv.user_id != user_id:
                    return None
            return run_row(run, RunRow)

        return await self._quick_orm(fn)

    async def run_for_execution(self, run_id: str) -> RunToExecute | None:
        """The run with its conversation's user id (what an executor needs to run it)."""

        def fn(s: Session) -> RunToExecute | None:
            run = s.get(Run, run_id)
            if run is None:
                return None
            conv = s.get(Conversation, run.conversation_id)
            if conv is None:
                return None
            return RunToExecute(
                run_id=run.id,
                conversation_id=run.conversation_id,
                user_id=conv.user_id,
                goal=run.goal,
                mode=run.mode,
                runtime=run.runtime,
                status=_status(run),
                owner=run.owner,
                stop_requested=bool(run.stop_requested),
                model=run.model or "",
                mcp_servers=_servers(run),
                approval=run.approval or "never",
                can_ask=True if run.can_ask is None else bool(run.can_ask),
                checkpoint=run.checkpoint,
                start_files=run.start_files,
                transcript=run.transcript,
                trace_context=run.trace_context,
            )

        return await self._quick_orm(fn)

    async def set_run_task_type(self, run_id: str, task_type: str) -> None:
        def fn(c: Connection) -> None:
            c.execute(update(RUNS).where(RUNS.c.id == run_id).values(task_type=task_type))

        await self._quick(fn)

    async def end_run(
        self, run_id: str, status: str, error: str = "", *, owner: str | None = None
    ) -> bool:
        """End a run that is still running (and, with ``owner``, still owned by it).
        Returns False when it had already ended: an ended run never changes again."""

        def fn(c: Connection) -> bool:
            now = utcnow()
            params = {"run_id": run_id, "v_status": status, "v_error": error, "now": now}
            if owner is not None:
                params["fence"] = owner
            cid = c.execute(_END_RUN[owner is not None], params).scalar_one_or_none()
            if cid is None:
                return False
            c.execute(_END_CONVERSATION, {"cid": cid, "v_status": status, "now": now})
            self._notify(c, MESSAGE_CHANNEL, run_id)
            return True

        ended = await self._quick(fn)
        if ended:  # once per run, by the process whose write ended it
            metrics.run_ended(status)
        return ended

    async def set_run_trace(self, run_id: str, trace_context: str) -> None:
        """Store the run's trace context (its first execution, traces on)."""

        def fn(c: Connection) -> None:
            c.execute(update(RUNS).where(RUNS.c.id == run_id).values(trace_context=trace_context))

        await self._core(fn)

    async def running_tasks(self, run_id: str) -> list[PlanTask]:
        def fn(c: Connection) -> list[PlanTask]:
            t = TASKS.c
            rows = c.execute(
                select(t.id, t.title, t.description, t.requirement, t.status)
                .where(t.run_id == run_id, t.status == ACTIVE)
                .order_by(t.position)
            ).all()
            return [
                PlanTask(
                    id=r[0],
                    title=r[1],
                    description=r[2],
                    requirement=r[3],
                    status=cast(TaskStatus, r[4]),
                )
                for r in rows
            ]

        return await self._core(fn)

    # -- checkpoints and take-over ----------------------------------------------------------
    async def save_checkpoint(
        self,
        run_id: str,
        checkpoint: str,
        transcript: str | None = None,
        owner: str | None = None,
        run_fields: Mapping[str, str] | None = None,
    ) -> None:
        """The run's checkpoint, its ``run_fields`` (:data:`RUN_FIELDS`) and (when given)
        its current task's finished turns, in one UPDATE. ``owner``: fenced as
        ``append_message`` is (:class:`RunNotOwned`, nothing written)."""
        values = run_values(checkpoint, run_fields)
        if transcript is not None:
            values["transcript"] = transcript

        await self._quick(lambda c: update_running(c, run_id, values, owner))

    async def save_start_files(self, run_id: str, files: str) -> None:
        def fn(c: Connection) -> None:
            c.execute(update(RUNS).where(RUNS.c.id == run_id).values(start_files=files))

        await self._quick(fn)

    async def take_over(self, run_id: str, expected: str, owner: str | None) -> int | None:
        """Take a running run from its dead owner ``expected`` for ``owner`` (None: queued
        again for a worker), counting the resume. Returns the run's resumes so far, or None
        when another process took it first (or it ended)."""

        def fn(c: Connection) -> int | None:
            q = fenced_update(run_id, RUNS.c.owner == expected, RUNS.c.wait_uuid.is_(None))
            row = c.execute(
                q.values(owner=owner, resumes=RUNS.c.resumes + 1).returning(RUNS.c.resumes)
            ).scalar_one_or_none()
            return None if row is None else int(row)

        return await self._core(fn)

    async def count_repeated_call(self, run_id: str) -> None:
        def fn(c: Connection) -> None:
            c.execute(
                update(RUNS)
                .where(RUNS.c.id == run_id)
                .values(repeated_calls=RUNS.c.repeated_calls + 1)
            )

        await self._core(fn)

    # -- tasks -----------------------------------------------------------------------------
    async def save_tasks(self, run_id: str, cid: str, tasks: list[PlanTask]) -> None:
        def fn(s: Session) -> None:
            for i, t in enumerate(tasks):
                if s.get(Task, t.id) is not None:  # saved before the run was resumed
                    continue
                s.add(
                    Task(
                        id=t.id,
                        run_id=run_id,
                        conversation_id=cid,
                        position=i,
                        title=t.title,
                        description=t.description,
                        requirement=t.requirement,
                        status=t.status,
                    )
                )

        await self._run(fn)

    async def update_task(self, task_id: str, status: str, result: str = "") -> None:
        def fn(c: Connection) -> None:
            c.execute(
                update(TASKS).where(TASKS.c.id == task_id).values(status=status, result=result)
            )

        await self._core(fn)


Row = TypeVar("Row", bound=RunRow)


def run_row(r: Run, shape: type[Row], **more: Any) -> Row:
    """The run ``r`` as ``shape`` (RunRow, or RunInfo with its ``more`` fields)."""
    return shape(
        run_id=r.id,
        conversation_id=r.conversation_id,
        goal=r.goal,
        mode=r.mode,
        runtime=r.runtime,
        status=_status(r),
        error=r.error,
        task_type=r.task_type,
        model=r.model,
        created_at=iso(r.created_at),
        ended_at=iso(r.ended_at),
        owner=r.owner,
        stop_requested=bool(r.stop_requested),
        resumes=r.resumes or 0,
        repeated_calls=r.repeated_calls or 0,
        mcp_servers=_servers(r),
        approval=r.approval or "never",
        can_ask=True if r.can_ask is None else bool(r.can_ask),
        wait=None if not r.wait_uuid else RunWait(uuid=r.wait_uuid, kind=r.wait_kind),
        **more,
    )


def _status(r: Run) -> str:
    # a run parked on a wait is `running` in its row, `waiting` to its readers
    return WAITING if r.status == ACTIVE and r.wait_uuid else r.status


def _servers(r: Run) -> list[str] | None:
    return None if r.mcp_servers is None else list(json.loads(r.mcp_servers))
