"""The messages of a conversation, stored before they are sent and read back in order.

``seq`` is taken with an atomic ``UPDATE … SET last_seq = last_seq + 1 RETURNING`` so it is
strictly increasing per conversation on PostgreSQL too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import Connection, bindparam, insert, select, update
from sqlalchemy.orm import aliased

from backend.messages.kinds import MessageKind
from backend.messages.message import Message
from backend.store.base import (
    ACTIVE,
    CONVERSATIONS,
    MESSAGE_CHANNEL,
    MESSAGES,
    StoreBase,
    update_running,
)
from backend.store.parked import NewWait, park_in
from backend.store.runs import run_values
from backend.store.tables import utcnow

# built once: a statement made per call costs more to build and key than to run
NEXT_SEQ = (
    update(CONVERSATIONS)
    .where(CONVERSATIONS.c.id == bindparam("cid"))
    .values(last_seq=CONVERSATIONS.c.last_seq + 1, updated_at=bindparam("now"))
    .returning(CONVERSATIONS.c.last_seq)
)
INSERT_MESSAGE = insert(MESSAGES)


class SqlMessages(StoreBase):
    """Messages: stored before they are sent, read back by seq."""

    # -- messages -------------------------------------------------------------------------
    async def append_message(
        self,
        msg: Message,
        checkpoint: str | None = None,
        wait: NewWait | None = None,
        owner: str | None = None,
        run_fields: Mapping[str, str] | None = None,
    ) -> Message:
        """Store a message, assigning its ``seq``, and (same transaction) the run's
        ``checkpoint``, its ``run_fields`` (``store.runs.RUN_FIELDS``) and the wait it parks
        on (``store.parked.wait_values``) when given. ``owner``: fenced, stored only while
        the run is running and ``owner`` still owns it (the same UPDATE of the run's row,
        which holds it until the commit); otherwise :class:`RunNotOwned` and nothing is
        written. Returns the stored message."""
        values = run_values(checkpoint, run_fields)

        def fn(c: Connection) -> Message:
            if values:
                update_running(c, msg.run_id, values, owner)
            elif owner is not None:  # nothing to write: the fence alone
                update_running(c, msg.run_id, {"owner": owner}, owner)
            if wait is not None:
                park_in(c, msg.run_id, wait)
            return self._insert(c, msg)

        return await self._quick(fn)

    def _insert(self, c: Connection, msg: Message) -> Message:
        """Insert ``msg`` with the conversation's next seq and announce it (in ``c``'s
        transaction)."""
        seq = c.execute(NEXT_SEQ, {"cid": msg.conversation_id, "now": utcnow()}).scalar_one()
        c.execute(
            INSERT_MESSAGE,
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
            },
        )
        self._notify(c, MESSAGE_CHANNEL, msg.run_id)
        return msg.model_copy(update={"seq": seq})

    async def messages(
        self,
        cid: str,
        *,
        run_id: str | None = None,
        after: int = 0,
        limit: int = 500,
        action_types: tuple[str, ...] | None = None,
        include_hidden: bool = False,
    ) -> list[Message]:
        """In seq order; only those in the history (a rewind takes the later ones out,
        backend/checkpoints) unless ``include_hidden``."""

        def fn(c: Connection) -> list[Message]:
            m = MESSAGES.c
            q = select(MESSAGES).where(m.conversation_id == cid, m.seq > after)
            if not include_hidden:
                q = q.where(m.hidden == 0)
            if run_id is not None:
                q = q.where(m.run_id == run_id)
            if action_types is not None:
                q = q.where(m.action_type.in_([str(k) for k in action_types]))
            rows = c.execute(q.order_by(m.seq).limit(limit)).all()
            return [message_of(r) for r in rows]

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
                    m.action_type != MessageKind.TASK.value,
                    ~closed.exists(),
                )
                .order_by(m.seq)
            ).all()
            return [message_of(r) for r in rows]

        return await self._core(fn)


def message_of(r: Any) -> Message:
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
