"""The Store's one database thread, with group commit.

Every piece of store work (a function of one connection, or of one ORM session) is queued
to a single thread. The thread takes what is queued (up to ``MAX_BATCH``) and runs it in ONE
transaction with one commit; only after that commit does it hand each caller its result, all
of one event loop's results in one wake-up. So a message is still stored before it is shown
(its caller hears of it after the commit, never before), while many runs' writes made at the
same moment share a transaction, a commit and the hand-offs between the threads.

When a batch fails (any exception: a fenced write that found another owner, a conflict, a
database error, a PostgreSQL deadlock between two processes' batches), it is rolled back as
a whole and each of its pieces runs again alone, in its own transaction, so that one
piece's failure is only its own. The store's functions touch nothing but the database
(their exceptions are raised before they write), so running one again is safe.

On SQLite (a file), the run's small writes and reads (``quick`` work: one or a few rows)
skip the thread when it has nothing to do: they run on the caller's event loop, on
connections that never wait for SQLite's lock (busy timeout 0) and never checkpoint the
WAL. If the lock is held (another process, or the lease thread, is writing), the work is
rolled back and queued to the thread, which waits for the lock as before; so the loop never
waits for the database. Each hand-off to the thread costs both threads CPU (the GIL passes
back and forth); a SQLite commit in WAL mode costs less than that. The thread checkpoints
the WAL after every CHECKPOINT_EVERY quick commits. Work goes quick only while the thread
holds nothing unfinished, so the database commits work in the order it was submitted.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

log = logging.getLogger(__name__)

MAX_BATCH = 64  # pieces of work one transaction takes at most
CHECKPOINT_EVERY = 200  # quick commits between two WAL checkpoints on the thread
SQLITE_BUSY, SQLITE_LOCKED = 5, 6  # primary result codes: another connection holds a lock


@dataclass(eq=False)
class Work:
    """One piece of store work: ``fn`` of a Connection (``orm`` False) or a Session."""

    fn: Callable[[Any], Any]
    orm: bool
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Any]


Outcome = tuple[Work, bool, Any]  # (work, succeeded, its result or exception)


class Committer:
    """The database thread: ``submit`` queues work, ``close`` drains and stops it."""

    def __init__(
        self, engine: Engine, name: str = "planact-db", quick_engine: Engine | None = None
    ) -> None:
        self.engine = engine
        # SQLite only: connections that never wait for the lock, for work run on the loop
        self.quick_engine = quick_engine
        self._queue: queue.SimpleQueue[Work | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._started = False
        self._closed = False
        self._lock = threading.Lock()
        self.batches = 0  # transactions that held more than one piece of work (tests, bench)
        self.queued = 0  # pieces handed to the thread and not finished yet
        self.quick_commits = 0  # quick work committed on the caller's loop

    def submit(
        self, fn: Callable[[Any], Any], orm: bool, quick: bool = False
    ) -> asyncio.Future[Any]:
        """``fn`` run in a transaction; its result once committed. ``quick``: small work
        (a few rows) that may run at once on this loop (SQLite, the thread idle, the lock
        free), else it is queued to the thread."""
        if self._closed:
            raise RuntimeError("the store is closed")
        loop = asyncio.get_running_loop()
        work = Work(fn, orm, loop, loop.create_future())
        if quick and self.quick_engine is not None and self.queued == 0:
            outcome = self._quick(work, self.quick_engine)
            if outcome is not None:
                _settle([outcome])
                return work.future
        self._hand_over(work)
        return work.future

    def _hand_over(self, work: Work) -> None:
        with self._lock:
            self.queued += 1
            if not self._started:
                self._thread.start()
                self._started = True
        self._queue.put(work)

    def _quick(self, work: Work, engine: Engine) -> Outcome | None:
        """``work`` on this loop; None when SQLite's lock is held (the thread waits for it)."""
        try:
            with engine.begin() as conn:
                result = _call(work, conn)
        except OperationalError as exc:
            code = getattr(exc.orig, "sqlite_errorcode", None)
            if code is not None and code & 0xFF in (SQLITE_BUSY, SQLITE_LOCKED):
                return None  # rolled back: it runs again on the thread
            return work, False, exc
        except Exception as exc:  # handed to the caller, as the thread does
            return work, False, exc
        self.quick_commits += 1
        if self.quick_commits % CHECKPOINT_EVERY == 0:
            self._checkpoint(work.loop)
        return work, True, result

    def _checkpoint(self, loop: asyncio.AbstractEventLoop) -> None:
        """Move the WAL into the database file, on the thread (its I/O and fsync off the
        loop); PASSIVE: it waits for nobody."""
        work = Work(_wal_checkpoint, False, loop, loop.create_future())
        work.future.add_done_callback(_log_failure)
        self._hand_over(work)

    async def close(self) -> None:
        """Finish the queued work, stop the thread."""
        self._closed = True
        if self._started:
            self._queue.put(None)
            await asyncio.get_running_loop().run_in_executor(None, self._thread.join)

    # -- the thread ------------------------------------------------------------------------
    def _loop(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            batch = [first]
            stop = False
            while len(batch) < MAX_BATCH:
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    stop = True
                    break
                batch.append(more)
            outcomes = self._execute(batch)
            with self._lock:
                self.queued -= len(batch)
            _deliver(outcomes)
            if stop:
                return

    def _execute(self, batch: list[Work]) -> list[Outcome]:
        # a caller that gave up before its work began (cancelled) does not have it run
        batch = [w for w in batch if not w.future.cancelled()]
        if len(batch) > 1:
            try:
                with self.engine.begin() as conn:
                    results = [(w, True, _call(w, conn)) for w in batch]
            except BaseException:  # rolled back: each piece again, alone
                pass
            else:
                self.batches += 1
                return results
        return [self._alone(w) for w in batch]

    def _alone(self, work: Work) -> Outcome:
        try:
            with self.engine.begin() as conn:
                return work, True, _call(work, conn)
        except BaseException as exc:  # handed to the caller
            return work, False, exc


def _call(work: Work, conn: Connection) -> Any:
    if not work.orm:
        return work.fn(conn)
    # the session joins the batch's transaction: its commit only flushes
    with Session(bind=conn, expire_on_commit=False, join_transaction_mode="rollback_only") as s:
        result = work.fn(s)
        s.flush()
        return result


def _wal_checkpoint(conn: Connection) -> None:
    conn.exec_driver_sql("PRAGMA wal_checkpoint(PASSIVE)")


def _log_failure(future: asyncio.Future[Any]) -> None:
    if not future.cancelled() and (exc := future.exception()) is not None:
        log.warning("checkpointing the WAL failed: %s", exc)


def _deliver(outcomes: list[Outcome]) -> None:
    """Hand the results to their event loops: one wake-up per loop."""
    by_loop: dict[asyncio.AbstractEventLoop, list[Outcome]] = {}
    for outcome in outcomes:
        by_loop.setdefault(outcome[0].loop, []).append(outcome)
    for loop, some in by_loop.items():
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits any more
            loop.call_soon_threadsafe(_settle, some)


def _settle(outcomes: list[Outcome]) -> None:
    for work, ok, value in outcomes:
        if work.future.done():  # cancelled meanwhile
            continue
        if ok:
            work.future.set_result(value)
        else:
            work.future.set_exception(value)
