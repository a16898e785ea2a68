"""The Store: every read and write of the product's state.

All database work runs on one dedicated thread, so the event loop never blocks on it and
writes are serialized (SQLite-friendly). ``seq`` is taken with an atomic
``UPDATE … SET last_seq = last_seq + 1 RETURNING`` so it is strictly increasing per
conversation on PostgreSQL too.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import Any, TypeVar, cast

from sqlalchemy import (
    Connection,
    Engine,
    Table,
    delete,
    func,
    insert,
    select,
    text,
    update,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, aliased, sessionmaker

from backend.messages.message import Message
from backend.store.db import make_engine, upgrade
from backend.store.tables import (
    Conversation,
    FileRow,
    Instance,
    MessageRow,
    Run,
    Task,
    Usage,
    utcnow,
)

T = TypeVar("T")

CONVERSATIONS = cast(Table, Conversation.__table__)
RUNS = cast(Table, Run.__table__)
MESSAGES = cast(Table, MessageRow.__table__)
TASKS = cast(Table, Task.__table__)
USAGE = cast(Table, Usage.__table__)
INSTANCES = cast(Table, Instance.__table__)
FILES = cast(Table, FileRow.__table__)
UPLOAD_RUN = "upload"

ACTIVE = "running"

# PostgreSQL NOTIFY channels, sent in the same transaction as the row they announce
MESSAGE_CHANNEL = "planact_msg"  # payload: run id (a message was stored, or the run ended)
# "stop:<run id>", or "forget:" + JSON [user id, conversation id, instance id that deleted it]
CONTROL_CHANNEL = "planact_ctl"


class ConflictError(Exception):
    """A run is already active in this conversation."""


class NotFoundError(Exception):
    pass


def new_id() -> str:
    return uuid.uuid4().hex


def _iso(dt: datetime | None) -> str | None:
    return dt.isoformat() + "Z" if dt else None


class Store:
    def __init__(self, url: str) -> None:
        self.engine: Engine = make_engine(url)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="planact-db")
        self.url = url
        self.is_postgres = self.engine.dialect.name == "postgresql"

    # -- plumbing -------------------------------------------------------------------------
    async def _run(self, fn: Callable[[Session], T]) -> T:
        def work() -> T:
            with self._sessions() as session, session.begin():
                return fn(session)

        return await asyncio.get_running_loop().run_in_executor(self._executor, work)

    async def _core(self, fn: Callable[[Connection], T]) -> T:
        """Like _run, with a plain connection: the hot paths skip the ORM's overhead."""

        def work() -> T:
            with self.engine.begin() as conn:
                return fn(conn)

        return await asyncio.get_running_loop().run_in_executor(self._executor, work)

    def migrate(self) -> None:
        upgrade(self.engine)

    def _notify(self, c: Connection | Session, channel: str, payload: str) -> None:
        """NOTIFY inside the caller's transaction (PostgreSQL only): listeners hear of the
        row exactly when it is committed, never before."""
        if self.is_postgres:
            c.execute(text("SELECT pg_notify(:ch, :p)"), {"ch": channel, "p": payload})

    async def close(self) -> None:
        await asyncio.get_running_loop().run_in_executor(self._executor, self.engine.dispose)
        self._executor.shutdown(wait=True)

    # -- conversations --------------------------------------------------------------------
    async def create_conversation(self, user_id: str, title: str) -> str:
        cid = new_id()

        def fn(c: Connection) -> str:
            now = utcnow()
            c.execute(
                insert(CONVERSATIONS).values(
                    id=cid,
                    user_id=user_id,
                    title=title[:200],
                    status="idle",
                    last_seq=0,
                    created_at=now,
                    updated_at=now,
                )
            )
            return cid

        return await self._core(fn)

    async def get_conversation(self, user_id: str, cid: str) -> dict[str, Any] | None:
        def fn(s: Session) -> dict[str, Any] | None:
            conv = s.get(Conversation, cid)
            if conv is None or conv.user_id != user_id:
                return None
            out = _conversation_dict(conv)
            runs = s.scalars(
                select(Run).where(Run.conversation_id == cid).order_by(Run.created_at)
            ).all()
            out["runs"] = [_run_dict(r) for r in runs]
            out["usage"] = _usage(s, Usage.conversation_id == cid)
            out.update(
                {
                    k: out["usage"]["total"][k]
                    for k in ("prompt_tokens", "completion_tokens", "total_tokens", "cost")
                }
            )
            return out

        return await self._run(fn)

    async def list_conversations(self, user_id: str, q: str = "") -> list[dict[str, Any]]:
        """Newest first; ``q`` keeps those whose title or one of whose goals contains it
        (case-insensitive, taken literally)."""

        def fn(s: Session) -> list[dict[str, Any]]:
            query = select(Conversation).where(Conversation.user_id == user_id)
            if q.strip():
                pattern = "%" + _escape_like(q.strip().lower()) + "%"
                in_goal = (
                    select(Run.id)
                    .where(
                        Run.conversation_id == Conversation.id,
                        func.lower(Run.goal).like(pattern, escape="\\"),
                    )
                    .exists()
                )
                query = query.where(
                    func.lower(Conversation.title).like(pattern, escape="\\") | in_goal
                )
            rows = s.scalars(
                query.order_by(Conversation.updated_at.desc(), Conversation.created_at.desc())
            ).all()
            return [_conversation_dict(c) for c in rows]

        return await self._run(fn)

    async def delete_conversation(self, user_id: str, cid: str, origin: str = "") -> bool:
        """Delete the conversation and all it holds; announce it to every process (``origin``:
        the instance id of the one deleting, which has dropped its sandboxes already)."""

        def fn(s: Session) -> bool:
            conv = s.get(Conversation, cid)
            if conv is None or conv.user_id != user_id:
                return False
            for model in (MessageRow, FileRow, Usage, Task):
                s.execute(delete(model).where(model.conversation_id == cid))
            s.execute(delete(Run).where(Run.conversation_id == cid))
            s.delete(conv)
            # every process drops what it holds for the workspace (a worker's sandbox)
            self._notify(s, CONTROL_CHANNEL, "forget:" + json.dumps([user_id, cid, origin]))
            return True

        return await self._run(fn)

    # -- titles and uploads (issue 13) ----------------------------------------------------
    async def rename_conversation(self, user_id: str, cid: str, title: str) -> bool:
        def fn(c: Connection) -> bool:
            done = c.execute(
                update(CONVERSATIONS)
                .where(CONVERSATIONS.c.id == cid, CONVERSATIONS.c.user_id == user_id)
                .values(title=title[:200])
            )
            return bool(done.rowcount)

        return await self._core(fn)

    async def retitle_if_default(self, cid: str, defaults: tuple[str, ...], title: str) -> bool:
        """Set the title unless a person chose one (the title is still one of
        ``defaults``: empty or the goal's first words)."""

        def fn(c: Connection) -> bool:
            done = c.execute(
                update(CONVERSATIONS)
                .where(CONVERSATIONS.c.id == cid, CONVERSATIONS.c.title.in_(defaults))
                .values(title=title[:200])
            )
            return bool(done.rowcount)

        return await self._core(fn)

    async def record_uploads(self, cid: str, files: list[tuple[str, int]]) -> None:
        """Files a person uploaded: file rows with run id ``upload`` (a run that changes one
        later takes the row over)."""
        await self.record_files(cid, UPLOAD_RUN, files)

    async def uploaded_files(self, cid: str) -> list[str]:
        def fn(c: Connection) -> list[str]:
            f = FILES.c
            rows = c.execute(
                select(f.filepath)
                .where(f.conversation_id == cid, f.run_id == UPLOAD_RUN)
                .order_by(f.filepath)
            ).all()
            return [r[0] for r in rows]

        return await self._core(fn)

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
    ) -> str:
        """Create a run owned by ``owner`` (None: queued for a worker); raises ConflictError
        if one is active (the partial unique index decides across processes),
        NotFoundError if no conversation."""
        rid = new_id()

        def fn(s: Session) -> str:
            # take the conversation row's lock (PostgreSQL) before checking for a live run
            conv = s.execute(
                select(Conversation).where(Conversation.id == cid).with_for_update()
            ).scalar_one_or_none()
            if conv is None or conv.user_id != user_id:
                raise NotFoundError(cid)
            active = s.scalar(
                select(func.count()).where(Run.conversation_id == cid, Run.status == ACTIVE)
            )
            if active:
                raise ConflictError(cid)
            s.add(
                Run(
                    id=rid,
                    conversation_id=cid,
                    goal=goal,
                    mode=mode,
                    runtime=runtime,
                    owner=owner,
                    stop_requested=False,
                    model=model,
                )
            )
            conv.status = ACTIVE
            conv.updated_at = utcnow()
            return rid

        try:
            return await self._run(fn)
        except IntegrityError as exc:  # another process's run won the race
            raise ConflictError(cid) from exc

    async def get_run(self, run_id: str, user_id: str | None = None) -> dict[str, Any] | None:
        def fn(s: Session) -> dict[str, Any] | None:
            run = s.get(Run, run_id)
            if run is None:
                return None
            if user_id is not None:
                conv = s.get(Conversation, run.conversation_id)
                if conv is None or conv.user_id != user_id:
                    return None
            return _run_dict(run)

        return await self._run(fn)

    async def run_for_execution(self, run_id: str) -> dict[str, Any] | None:
        """The run with its conversation's user id (what an executor needs to run it)."""

        def fn(s: Session) -> dict[str, Any] | None:
            run = s.get(Run, run_id)
            if run is None:
                return None
            conv = s.get(Conversation, run.conversation_id)
            if conv is None:
                return None
            return {**_run_dict(run), "user_id": conv.user_id}

        return await self._run(fn)

    async def set_run_task_type(self, run_id: str, task_type: str) -> None:
        def fn(c: Connection) -> None:
            c.execute(update(RUNS).where(RUNS.c.id == run_id).values(task_type=task_type))

        await self._core(fn)

    async def end_run(
        self, run_id: str, status: str, error: str = "", *, owner: str | None = None
    ) -> bool:
        """End a run that is still running (and, with ``owner``, still owned by it).
        Returns False when it had already ended: an ended run never changes again."""

        def fn(c: Connection) -> bool:
            now = utcnow()
            q = update(RUNS).where(RUNS.c.id == run_id, RUNS.c.status == ACTIVE)
            if owner is not None:
                q = q.where(RUNS.c.owner == owner)
            cid = c.execute(
                q.values(status=status, error=error, ended_at=now).returning(RUNS.c.conversation_id)
            ).scalar_one_or_none()
            if cid is None:
                return False
            c.execute(
                update(CONVERSATIONS)
                .where(CONVERSATIONS.c.id == cid)
                .values(status=status, updated_at=now)
            )
            self._notify(c, MESSAGE_CHANNEL, run_id)
            return True

        return await self._core(fn)

    # -- ownership: instances, leases, stop requests --------------------------------------
    async def renew_instance(
        self, iid: str, kind: str, lease_seconds: float, host: str = ""
    ) -> None:
        await self._core(lambda c: self._renew(c, iid, kind, lease_seconds, host))

    def renew_instance_sync(self, iid: str, kind: str, lease_seconds: float, host: str) -> None:
        """The same from any thread (the lease keeper's own): a busy event loop does not
        cost a live process its lease."""
        with self.engine.begin() as c:
            self._renew(c, iid, kind, lease_seconds, host)

    @staticmethod
    def _renew(c: Connection, iid: str, kind: str, lease_seconds: float, host: str) -> None:
        """Register the instance or extend its lease to now + lease_seconds."""
        if True:
            now = utcnow()
            until = now + timedelta(seconds=lease_seconds)
            done = c.execute(
                update(INSTANCES).where(INSTANCES.c.id == iid).values(expires_at=until)
            ).rowcount
            if not done:
                c.execute(
                    insert(INSTANCES).values(
                        id=iid,
                        kind=kind,
                        host=(host or socket.gethostname())[:200],
                        pid=os.getpid(),
                        started_at=now,
                        expires_at=until,
                    )
                )

    async def instances(self) -> list[dict[str, Any]]:
        def fn(c: Connection) -> list[dict[str, Any]]:
            i = INSTANCES.c
            rows = c.execute(select(i.id, i.kind, i.host, i.pid, i.expires_at)).all()
            now = utcnow()
            return [
                {"id": r[0], "kind": r[1], "host": r[2], "pid": r[3], "live": r[4] > now}
                for r in rows
            ]

        return await self._core(fn)

    async def expire_instance(self, iid: str) -> None:
        """End an instance's lease now (it is known to be dead)."""
        past = utcnow() - timedelta(seconds=1)
        await self._core(
            lambda c: c.execute(
                update(INSTANCES).where(INSTANCES.c.id == iid).values(expires_at=past)
            )
        )

    async def drop_instance(self, iid: str) -> None:
        await self._core(lambda c: c.execute(delete(INSTANCES).where(INSTANCES.c.id == iid)))

    async def live_instances(self) -> set[str]:
        def fn(c: Connection) -> set[str]:
            rows = c.execute(select(INSTANCES.c.id).where(INSTANCES.c.expires_at > utcnow()))
            return {r[0] for r in rows}

        return await self._core(fn)

    async def expired_instances(self, grace_seconds: float) -> list[str]:
        """Instances whose lease ended more than ``grace_seconds`` ago and that own no
        running run any more (their runs were recovered): safe to forget."""

        def fn(c: Connection) -> list[str]:
            cutoff = utcnow() - timedelta(seconds=grace_seconds)
            busy = select(RUNS.c.id).where(RUNS.c.owner == INSTANCES.c.id, RUNS.c.status == ACTIVE)
            rows = c.execute(
                select(INSTANCES.c.id).where(INSTANCES.c.expires_at < cutoff, ~busy.exists())
            )
            return [r[0] for r in rows]

        return await self._core(fn)

    async def delete_instances(self, ids: list[str]) -> None:
        if ids:
            await self._core(lambda c: c.execute(delete(INSTANCES).where(INSTANCES.c.id.in_(ids))))

    async def orphaned_runs(self) -> list[dict[str, Any]]:
        """Running runs whose owner's lease expired (or whose owner is unknown)."""

        def fn(c: Connection) -> list[dict[str, Any]]:
            live = select(INSTANCES.c.id).where(
                INSTANCES.c.id == RUNS.c.owner, INSTANCES.c.expires_at > utcnow()
            )
            rows = c.execute(
                select(RUNS.c.id, RUNS.c.conversation_id, RUNS.c.owner).where(
                    RUNS.c.status == ACTIVE, RUNS.c.owner.is_not(None), ~live.exists()
                )
            ).all()
            return [{"run_id": r[0], "conversation_id": r[1], "owner": r[2]} for r in rows]

        return await self._core(fn)

    async def claim_run(self, run_id: str, owner: str, expected: str | None) -> bool:
        """Take a running run from ``expected`` (None: a queued run nobody took)."""

        def fn(c: Connection) -> bool:
            was = RUNS.c.owner.is_(None) if expected is None else RUNS.c.owner == expected
            q = update(RUNS).where(RUNS.c.id == run_id, RUNS.c.status == ACTIVE, was)
            return bool(c.execute(q.values(owner=owner)).rowcount)

        return await self._core(fn)

    async def request_stop(self, run_id: str) -> dict[str, Any] | None:
        """Record a stop request on a running run and tell its owner (same transaction).
        Returns ``{"owner", "conversation_id"}``, or None when the run is not running."""

        def fn(c: Connection) -> dict[str, Any] | None:
            row = c.execute(
                update(RUNS)
                .where(RUNS.c.id == run_id, RUNS.c.status == ACTIVE)
                .values(stop_requested=True)
                .returning(RUNS.c.owner, RUNS.c.conversation_id)
            ).one_or_none()
            if row is None:
                return None
            self._notify(c, CONTROL_CHANNEL, f"stop:{run_id}")
            return {"owner": row[0], "conversation_id": row[1]}

        return await self._core(fn)

    async def run_flags(self, run_ids: list[str]) -> dict[str, tuple[str, bool, str | None]]:
        """run id -> (status, stop requested, owner) for the given runs."""
        if not run_ids:
            return {}

        def fn(c: Connection) -> dict[str, tuple[str, bool, str | None]]:
            rows = c.execute(
                select(RUNS.c.id, RUNS.c.status, RUNS.c.stop_requested, RUNS.c.owner).where(
                    RUNS.c.id.in_(run_ids)
                )
            ).all()
            return {r[0]: (r[1], bool(r[2]), r[3]) for r in rows}

        return await self._core(fn)

    async def running_run_of(self, cid: str) -> str | None:
        def fn(c: Connection) -> str | None:
            return c.execute(
                select(RUNS.c.id).where(RUNS.c.conversation_id == cid, RUNS.c.status == ACTIVE)
            ).scalar_one_or_none()

        return await self._core(fn)

    async def open_messages(self, run_id: str) -> list[Message]:
        """The run's `running` action messages that have no final partner yet."""

        def fn(c: Connection) -> list[Message]:
            m = MESSAGES.c
            later = aliased(MESSAGES)
            closed = select(later.c.id).where(
                later.c.run_id == run_id, later.c.uuid == m.uuid, later.c.status != ACTIVE
            )
            rows = c.execute(
                select(MESSAGES)
                .where(
                    m.run_id == run_id,
                    m.status == ACTIVE,
                    m.action_type != "task",
                    ~closed.exists(),
                )
                .order_by(m.seq)
            ).all()
            return [_message(r) for r in rows]

        return await self._core(fn)

    async def running_tasks(self, run_id: str) -> list[dict[str, Any]]:
        def fn(c: Connection) -> list[dict[str, Any]]:
            t = TASKS.c
            rows = c.execute(
                select(t.id, t.title, t.description, t.requirement, t.status)
                .where(t.run_id == run_id, t.status == ACTIVE)
                .order_by(t.position)
            ).all()
            return [
                {
                    "id": r[0],
                    "title": r[1],
                    "description": r[2],
                    "requirement": r[3],
                    "status": r[4],
                }
                for r in rows
            ]

        return await self._core(fn)

    async def run_files(self, run_id: str) -> list[tuple[str, int]]:
        def fn(c: Connection) -> list[tuple[str, int]]:
            f = cast(Table, FileRow.__table__).c
            rows = c.execute(
                select(f.filepath, f.filesize).where(f.run_id == run_id).order_by(f.filepath)
            ).all()
            return [(r[0], int(r[1])) for r in rows]

        return await self._core(fn)

    # -- messages -------------------------------------------------------------------------
    async def append_message(self, msg: Message) -> Message:
        """Store a message, assigning its ``seq``. Returns the stored message."""

        def fn(c: Connection) -> Message:
            seq = c.execute(
                update(CONVERSATIONS)
                .where(CONVERSATIONS.c.id == msg.conversation_id)
                .values(last_seq=CONVERSATIONS.c.last_seq + 1, updated_at=utcnow())
                .returning(CONVERSATIONS.c.last_seq)
            ).scalar_one()
            c.execute(
                insert(MESSAGES),
                [
                    {
                        "conversation_id": msg.conversation_id,
                        "run_id": msg.run_id,
                        "seq": seq,
                        "uuid": msg.uuid,
                        "role": msg.role,
                        "status": msg.status,
                        "action_type": msg.meta.action_type,
                        "content": msg.content,
                        "meta": msg.meta.model_dump(by_alias=True),
                        "timestamp": msg.timestamp,
                    }
                ],
            )
            self._notify(c, MESSAGE_CHANNEL, msg.run_id)
            return msg.model_copy(update={"seq": seq})

        return await self._core(fn)

    async def messages(
        self,
        cid: str,
        *,
        run_id: str | None = None,
        after: int = 0,
        limit: int = 500,
        action_types: tuple[str, ...] | None = None,
    ) -> list[Message]:
        def fn(c: Connection) -> list[Message]:
            m = MESSAGES.c
            q = select(MESSAGES).where(m.conversation_id == cid, m.seq > after)
            if run_id is not None:
                q = q.where(m.run_id == run_id)
            if action_types is not None:
                q = q.where(m.action_type.in_(action_types))
            rows = c.execute(q.order_by(m.seq).limit(limit)).all()
            return [_message(r) for r in rows]

        return await self._core(fn)

    # -- tasks, files, usage --------------------------------------------------------------
    async def save_tasks(self, run_id: str, cid: str, tasks: list[dict[str, str]]) -> None:
        def fn(s: Session) -> None:
            for i, t in enumerate(tasks):
                s.add(
                    Task(
                        id=t["id"],
                        run_id=run_id,
                        conversation_id=cid,
                        position=i,
                        title=t["title"],
                        description=t.get("description", ""),
                        requirement=t.get("requirement", ""),
                        status=t.get("status", "pending"),
                    )
                )

        await self._run(fn)

    async def update_task(self, task_id: str, status: str, result: str = "") -> None:
        def fn(c: Connection) -> None:
            c.execute(
                update(TASKS).where(TASKS.c.id == task_id).values(status=status, result=result)
            )

        await self._core(fn)

    async def record_files(self, cid: str, run_id: str, files: list[tuple[str, int]]) -> None:
        def fn(s: Session) -> None:
            for path, size in files:
                row = s.scalar(
                    select(FileRow).where(FileRow.conversation_id == cid, FileRow.filepath == path)
                )
                if row is None:
                    s.add(FileRow(conversation_id=cid, run_id=run_id, filepath=path, filesize=size))
                else:
                    row.run_id, row.filesize, row.updated_at = run_id, size, utcnow()

        await self._run(fn)

    async def record_usage(
        self,
        cid: str,
        run_id: str,
        stage: str,
        model: str,
        prompt_tokens: int,
        completion_tokens: int,
        cost: float | None,
    ) -> None:
        def fn(c: Connection) -> None:
            c.execute(
                insert(USAGE).values(
                    conversation_id=cid,
                    run_id=run_id,
                    stage=stage,
                    model=model,
                    prompt_tokens=prompt_tokens,
                    completion_tokens=completion_tokens,
                    cost=cost,
                    created_at=utcnow(),
                )
            )

        await self._core(fn)

    async def run_usage(self, run_id: str) -> dict[str, Any]:
        return await self._run(lambda s: _usage(s, Usage.run_id == run_id))


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _conversation_dict(c: Conversation) -> dict[str, Any]:
    return {
        "conversation_id": c.id,
        "title": c.title,
        "status": c.status,
        "created_at": _iso(c.created_at),
        "updated_at": _iso(c.updated_at),
    }


def _run_dict(r: Run) -> dict[str, Any]:
    return {
        "run_id": r.id,
        "conversation_id": r.conversation_id,
        "goal": r.goal,
        "mode": r.mode,
        "runtime": r.runtime,
        "status": r.status,
        "error": r.error,
        "task_type": r.task_type,
        "model": r.model,
        "created_at": _iso(r.created_at),
        "ended_at": _iso(r.ended_at),
        "owner": r.owner,
        "stop_requested": bool(r.stop_requested),
    }


def _usage(s: Session, where: Any) -> dict[str, Any]:
    rows = s.execute(
        select(
            Usage.stage,
            func.count(),
            func.sum(Usage.prompt_tokens),
            func.sum(Usage.completion_tokens),
            func.sum(Usage.cost),
            func.count(Usage.cost),
        )
        .where(where)
        .group_by(Usage.stage)
    ).all()
    stages: dict[str, dict[str, Any]] = {}
    total = {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    total_cost: float | None = None
    for stage, calls, pt, ct, cost, costed in rows:
        pt, ct = int(pt or 0), int(ct or 0)
        stage_cost = float(cost) if costed and cost is not None else None
        stages[stage] = {
            "calls": calls,
            "prompt_tokens": pt,
            "completion_tokens": ct,
            "total_tokens": pt + ct,
            "cost": stage_cost,
        }
        total["calls"] += calls
        total["prompt_tokens"] += pt
        total["completion_tokens"] += ct
        total["total_tokens"] += pt + ct
        if stage_cost is not None:
            total_cost = (total_cost or 0.0) + stage_cost
    return {"total": {**total, "cost": total_cost}, "stages": stages}


def _message(r: Any) -> Message:
    return Message.model_validate(
        {
            "role": r.role,
            "uuid": r.uuid,
            "status": r.status,
            "content": r.content,
            "timestamp": r.timestamp,
            "conversation_id": r.conversation_id,
            "run_id": r.run_id,
            "seq": r.seq,
            "meta": r.meta,
        }
    )
