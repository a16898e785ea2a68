"""The Store's plumbing: the engine, its one database thread, NOTIFY, ids and errors.

All database work runs on one dedicated thread (backend/store/committer.py), so the event
loop never blocks on it and writes are serialized (SQLite-friendly); work queued at the same
moment shares one transaction (group commit), its callers answered after the commit.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar, cast

from sqlalchemy import (
    ColumnElement,
    Connection,
    Engine,
    Table,
    Update,
    bindparam,
    text,
    update,
)
from sqlalchemy.orm import Session

from backend.store.committer import Committer
from backend.store.db import is_sqlite_file, make_engine, upgrade
from backend.store.tables import (
    Conversation,
    FileRow,
    Instance,
    MessageRow,
    Run,
    Task,
    Usage,
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


class RestoringError(ConflictError):
    """A rewind is putting this conversation's files back (for a moment: try again)."""


class NotFoundError(Exception):
    pass


class RunNotOwned(Exception):
    """A write fenced by a run's owner found another owner (or no running run): the run was
    taken over while this process still executed it (its lease had expired, e.g. the
    process stalled), or it ended elsewhere. Nothing was written."""

    def __init__(self, run_id: str) -> None:
        super().__init__(f"run {run_id} is no longer owned by this process")
        self.run_id = run_id


def update_running(c: Connection, run_id: str, values: dict[str, Any], owner: str | None) -> None:
    """Write ``values`` to the running run's row; with ``owner``, fenced: only while ``owner``
    still owns the run (the UPDATE holds the row until the commit), else :class:`RunNotOwned`
    and nothing is written."""
    params = {f"v_{k}": v for k, v in values.items()}
    params["run_id"] = run_id
    if owner is not None:
        params["fence"] = owner
    updated = c.execute(_running_update(tuple(values), owner is not None), params).rowcount
    if owner is not None and not updated:
        raise RunNotOwned(run_id)


def while_running(run_id: str, *fence: ColumnElement[bool]) -> tuple[ColumnElement[bool], ...]:
    """The conditions of a change to run ``run_id`` that holds only while the run is running
    and every condition of ``fence`` holds."""
    return (RUNS.c.id == run_id, RUNS.c.status == ACTIVE, *fence)


def fenced_update(run_id: str, *fence: ColumnElement[bool]) -> Update:
    """An UPDATE of run ``run_id`` that changes it only while it is running and ``fence``
    holds: checked and changed in one statement, so of two processes racing for the same
    transition exactly one makes it."""
    return update(RUNS).where(*while_running(run_id, *fence))


_RUNNING_UPDATES: dict[tuple[tuple[str, ...], bool], Update] = {}


def _running_update(columns: tuple[str, ...], fenced: bool) -> Update:
    """The UPDATE of a running run's ``columns`` (bound as ``v_<column>``), built once per
    shape: a statement made per call costs more to build and key than to run."""
    key = (columns, fenced)
    q = _RUNNING_UPDATES.get(key)
    if q is None:
        q = update(RUNS).where(RUNS.c.id == bindparam("run_id"), RUNS.c.status == ACTIVE)
        if fenced:
            q = q.where(RUNS.c.owner == bindparam("fence"))
        q = q.values({col: bindparam(f"v_{col}") for col in columns})
        _RUNNING_UPDATES[key] = q
    return q


def new_id() -> str:
    return uuid.uuid4().hex


def iso(dt: datetime | None) -> str | None:
    return dt.isoformat() + "Z" if dt else None


class StoreBase:
    """What every part of the Store shares: one engine, one database thread."""

    def __init__(self, url: str) -> None:
        self.engine: Engine = make_engine(url)
        quick = make_engine(url, never_wait=True) if is_sqlite_file(url) else None
        self._committer = Committer(self.engine, quick_engine=quick)
        self.url = url
        self.is_postgres = self.engine.dialect.name == "postgresql"

    # -- plumbing -------------------------------------------------------------------------
    async def _run(self, fn: Callable[[Session], T]) -> T:
        """``fn`` in a transaction on the database thread (with what else is queued then);
        its result once that transaction is committed."""
        result: T = await self._committer.submit(fn, orm=True)
        return result

    async def _core(self, fn: Callable[[Connection], T]) -> T:
        """Like _run, with a plain connection: the hot paths skip the ORM's overhead."""
        result: T = await self._committer.submit(fn, orm=False)
        return result

    async def _quick(self, fn: Callable[[Connection], T]) -> T:
        """Like _core, for small work (a few rows, bounded): on SQLite it runs at once on
        this loop when the database thread is idle and the lock free (committer.py)."""
        result: T = await self._committer.submit(fn, orm=False, quick=True)
        return result

    async def _quick_orm(self, fn: Callable[[Session], T]) -> T:
        """Like _run, for small work: see _quick."""
        result: T = await self._committer.submit(fn, orm=True, quick=True)
        return result

    @property
    def committer(self) -> Committer:
        """The database thread (tests and the bench read its counters)."""
        return self._committer

    @property
    def engines(self) -> list[Engine]:
        """Every engine that writes: the thread's, and on SQLite the quick path's."""
        quick = self._committer.quick_engine
        return [self.engine] if quick is None else [self.engine, quick]

    def migrate(self) -> None:
        upgrade(self.engine)

    def _notify(self, c: Connection | Session, channel: str, payload: str) -> None:
        """NOTIFY inside the caller's transaction (PostgreSQL only): listeners hear of the
        row exactly when it is committed, never before."""
        if self.is_postgres:
            c.execute(text("SELECT pg_notify(:ch, :p)"), {"ch": channel, "p": payload})

    async def close(self) -> None:
        await self._committer.close()
        await asyncio.get_running_loop().run_in_executor(None, self.engine.dispose)
        if self._committer.quick_engine is not None:
            self._committer.quick_engine.dispose()
