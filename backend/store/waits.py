"""Runs parked while they wait for a person (backend/waits): the wait is stored with its
message, released by its owner, and ended by one atomic transition on any process.

A waiting run keeps the status ``running`` in its row (so one active run per conversation,
stop requests and message appends hold as for any run) and names its wait in ``wait_uuid``;
readers see the status ``waiting`` (``run_dict``). A parked run has no owner: no lease
recovers it, no worker claims it, until the answer (or a stop, or the timeout) takes it.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, select

from backend.messages.message import Message
from backend.observe import metrics
from backend.store import recovery
from backend.store.base import ACTIVE, MESSAGES, RUNS, fenced_update, while_running
from backend.store.messages import SqlMessages, message_of
from backend.store.parked import CLEARED, WAITING, WaitAnswer, conversation_status
from backend.store.rows import ExpiredWait, OrphanedWait
from backend.store.tables import utcnow

__all__ = ["WAITING", "SqlWaits"]

# a run being stopped is neither released nor answered: whoever holds it ends it
_NOT_STOPPED = RUNS.c.stop_requested.is_(False)


class SqlWaits(SqlMessages):
    """The waits of parked runs."""

    async def release_parked(self, run_id: str, owner: str, uuid: str) -> bool | None:
        """The owner lets go of a run it parked on ``uuid``: it has no owner from now on.
        Returns whether a stop was requested meanwhile (the owner then ends it), or None
        when the wait was answered (or the run ended) first: nothing to release."""

        def fn(c: Connection) -> bool | None:
            held = (RUNS.c.owner == owner, RUNS.c.wait_uuid == uuid)
            row = c.execute(
                fenced_update(run_id, *held, _NOT_STOPPED).values(owner=None).returning(RUNS.c.id)
            ).one_or_none()
            if row is not None:
                return False
            stop = c.execute(
                select(RUNS.c.stop_requested).where(*while_running(run_id, *held))
            ).scalar_one_or_none()
            return None if stop is None else True

        return await self._core(fn)

    async def end_wait(
        self,
        run_id: str,
        uuid: str,
        kind: str,
        owner: str | None,
        answer: WaitAnswer,
        partner: Message,
    ) -> Message | None:
        """The one transition that answers a wait (any process, at most once): the run
        waiting on ``uuid`` (of ``kind``) goes on, owned by ``owner`` (None: queued for a
        worker), with ``answer`` stored for it. Its owner may still be the process
        that parked it (an answer right after the message). False: it was not waiting on
        it any more (answered, stopped or ended): None. Else the wait message's final
        ``partner``, stored in the same transaction (the answer is never lost between)."""

        def fn(c: Connection) -> Message | None:
            waiting = (RUNS.c.wait_uuid == uuid, RUNS.c.wait_kind == kind, _NOT_STOPPED)
            cid = c.execute(
                fenced_update(run_id, *waiting)
                .values(owner=owner, wait_answer=answer.model_dump_json(), **CLEARED)
                .returning(RUNS.c.conversation_id)
            ).scalar_one_or_none()
            if cid is None:
                return None
            conversation_status(c, cid, ACTIVE)
            partner.conversation_id, partner.run_id = cid, run_id
            return self._insert(c, partner)

        stored = await self._core(fn)
        if stored is not None and kind == "approval":  # decided once, by this write
            metrics.approval_decided("timeout" if answer.by == "timeout" else answer.decision)
        return stored

    async def take_parked(self, run_id: str, owner: str, expected: str | None = None) -> bool:
        """Take a parked run (owned by ``expected``; None: by nobody) to end it here (a
        stop). False: it was not parked so (answered, or ended, first)."""

        def fn(c: Connection) -> bool:
            was = RUNS.c.owner.is_(None) if expected is None else RUNS.c.owner == expected
            parked = fenced_update(run_id, RUNS.c.wait_uuid.is_not(None), was)
            done = c.execute(parked.values(owner=owner, **CLEARED))
            return bool(done.rowcount)

        return await self._core(fn)

    async def orphaned_waits(self) -> list[OrphanedWait]:
        """Parked runs whose owner died before it let go of them (its lease expired)."""
        return await self._quick(lambda c: recovery.orphaned_waits(c, utcnow()))

    async def expired_waits(self, now: datetime | None = None) -> list[ExpiredWait]:
        """Waits past their deadline."""
        return await self._quick(lambda c: recovery.expired_waits(c, now or utcnow()))

    async def wait_message(self, run_id: str, uuid: str) -> tuple[Message, bool] | None:
        """The run's `running` message ``uuid`` and whether it has its final partner."""

        def fn(c: Connection) -> tuple[Message, bool] | None:
            m = MESSAGES.c
            rows = c.execute(
                select(MESSAGES).where(m.run_id == run_id, m.uuid == uuid).order_by(m.seq)
            ).all()
            if not rows or rows[0].status != ACTIVE:
                return None
            return message_of(rows[0]), len(rows) > 1

        return await self._core(fn)

    async def wait_answer(self, run_id: str) -> WaitAnswer | None:
        """The answer that ended the run's last wait, if any."""

        def fn(c: Connection) -> str | None:
            return c.execute(
                select(RUNS.c.wait_answer).where(RUNS.c.id == run_id)
            ).scalar_one_or_none()

        raw = await self._core(fn)
        return WaitAnswer.model_validate_json(raw) if raw else None
