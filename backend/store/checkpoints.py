"""The index of a conversation's checkpoints (backend/checkpoints), what a rewind hides of
its history, forks and share links: rows only; the files are in the shadow repository."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import Connection, Table, delete, func, insert, select, update

from backend.store.base import (
    ACTIVE,
    CONVERSATIONS,
    MESSAGES,
    RUNS,
    ConflictError,
    RestoringError,
    StoreBase,
)
from backend.store.tables import CheckpointRow, ShareRow, utcnow

CHECKPOINTS = cast(Table, CheckpointRow.__table__)
SHARES = cast(Table, ShareRow.__table__)
IN_HISTORY, REWOUND, DROPPED = 0, 1, 2
# seconds a rewind holds its conversation at most (restoring 2,000 files takes ~0.1 s; a
# rewinder that died is past it long before anyone would wait that long)
RESTORE_LEASE = 120.0


@dataclass(frozen=True, slots=True)
class StoredCheckpoint:
    conversation_id: str
    seq: int
    run_id: str
    label: str
    files_changed: int
    commit: str
    bytes: int
    created_at: datetime


@dataclass(frozen=True, slots=True)
class StoredShare:
    token: str
    conversation_id: str
    user_id: str
    seq: int
    commit: str
    title: str
    seqs: str
    created_at: datetime


def _checkpoint(r: Any) -> StoredCheckpoint:
    m = r._mapping
    return StoredCheckpoint(**{k: m[k] for k in StoredCheckpoint.__slots__})


def _share(r: Any) -> StoredShare:
    m = r._mapping
    return StoredShare(**{k: m[k] for k in StoredShare.__slots__})


class SqlCheckpoints(StoreBase):
    """Checkpoints (their index), rewinds, forks and shares."""

    async def add_checkpoint(self, cp: StoredCheckpoint) -> None:
        values = {k: getattr(cp, k) for k in StoredCheckpoint.__slots__}

        def fn(c: Connection) -> None:
            c.execute(insert(CHECKPOINTS).values(**values))

        await self._quick(fn)

    async def checkpoints_of(self, cid: str) -> list[StoredCheckpoint]:
        """Oldest first (rewound ones too, so a rewind can redo; never dropped ones)."""

        def fn(c: Connection) -> list[StoredCheckpoint]:
            rows = c.execute(
                select(CHECKPOINTS)
                .where(CHECKPOINTS.c.conversation_id == cid)
                .order_by(CHECKPOINTS.c.seq)
            ).all()
            return [_checkpoint(r) for r in rows]

        return await self._core(fn)

    async def checkpoint_at(self, cid: str, seq: int) -> StoredCheckpoint | None:
        def fn(c: Connection) -> StoredCheckpoint | None:
            r = c.execute(
                select(CHECKPOINTS).where(
                    CHECKPOINTS.c.conversation_id == cid, CHECKPOINTS.c.seq == seq
                )
            ).one_or_none()
            return None if r is None else _checkpoint(r)

        return await self._core(fn)

    async def last_checkpoint(self, cid: str) -> StoredCheckpoint | None:
        def fn(c: Connection) -> StoredCheckpoint | None:
            r = c.execute(
                select(CHECKPOINTS)
                .where(CHECKPOINTS.c.conversation_id == cid)
                .order_by(CHECKPOINTS.c.seq.desc())
                .limit(1)
            ).one_or_none()
            return None if r is None else _checkpoint(r)

        return await self._quick(fn)

    async def delete_checkpoints(self, cid: str, seqs: list[int]) -> None:
        def fn(c: Connection) -> None:
            c.execute(
                delete(CHECKPOINTS).where(
                    CHECKPOINTS.c.conversation_id == cid, CHECKPOINTS.c.seq.in_(seqs)
                )
            )

        await self._core(fn)

    async def update_checkpoint_bytes(self, cid: str, seq: int, size: int) -> None:
        def fn(c: Connection) -> None:
            c.execute(
                update(CHECKPOINTS)
                .where(CHECKPOINTS.c.conversation_id == cid, CHECKPOINTS.c.seq == seq)
                .values(bytes=size)
            )

        await self._core(fn)

    async def checkpoint_bytes(self, cid: str) -> int:
        """What the conversation's checkpoints added on disk, summed."""

        def fn(c: Connection) -> int:
            k = CHECKPOINTS.c
            found = c.execute(
                select(func.sum(k.bytes)).where(k.conversation_id == cid)
            ).scalar_one_or_none()
            return int(found or 0)

        return await self._quick(fn)

    async def last_seq(self, cid: str) -> int:
        def fn(c: Connection) -> int:
            found = c.execute(
                select(CONVERSATIONS.c.last_seq).where(CONVERSATIONS.c.id == cid)
            ).scalar_one_or_none()
            return int(found or 0)

        return await self._quick(fn)

    async def visible_seq(self, cid: str) -> int:
        """The seq of the last message in the history (0: none)."""

        def fn(c: Connection) -> int:
            m = MESSAGES.c
            found = c.execute(
                select(m.seq)
                .where(m.conversation_id == cid, m.hidden == IN_HISTORY)
                .order_by(m.seq.desc())
                .limit(1)
            ).scalar_one_or_none()
            return int(found or 0)

        return await self._core(fn)

    # -- rewinds ----------------------------------------------------------------------------
    async def rewind_history(self, cid: str, seq: int, lease: float = RESTORE_LEASE) -> None:
        """Messages after ``seq`` out of the history, those up to it (rewound away before)
        back in, and the conversation taken for ``lease`` seconds while the caller puts its
        files back (:meth:`restored` gives it back; no run starts meanwhile). ConflictError
        while a run is active (or waiting) in the conversation, RestoringError while another
        rewind holds it: the conversation's row is taken first, as start_run does, so neither
        slips past the other."""

        def fn(c: Connection) -> None:
            now = utcnow()
            conv = CONVERSATIONS.c
            until = c.execute(
                update(CONVERSATIONS)
                .where(conv.id == cid)
                .values(updated_at=now)
                .returning(conv.restoring_until)
            ).scalar_one_or_none()
            if until is not None and until > now:
                raise RestoringError(cid)
            running = c.execute(
                select(RUNS.c.id).where(RUNS.c.conversation_id == cid, RUNS.c.status == ACTIVE)
            ).first()
            if running is not None:
                raise ConflictError(cid)
            c.execute(
                update(CONVERSATIONS)
                .where(conv.id == cid)
                .values(restoring_until=now + timedelta(seconds=lease))
            )
            m = MESSAGES.c
            c.execute(
                update(MESSAGES)
                .where(m.conversation_id == cid, m.seq > seq, m.hidden == IN_HISTORY)
                .values(hidden=REWOUND)
            )
            c.execute(
                update(MESSAGES)
                .where(m.conversation_id == cid, m.seq <= seq, m.hidden == REWOUND)
                .values(hidden=IN_HISTORY)
            )

        await self._core(fn)

    async def restored(self, cid: str) -> None:
        """The rewind of ``cid`` put its files back (or gave up): runs may start again."""

        def fn(c: Connection) -> None:
            c.execute(
                update(CONVERSATIONS).where(CONVERSATIONS.c.id == cid).values(restoring_until=None)
            )

        await self._core(fn)

    async def drop_rewound(self, cid: str) -> list[int]:
        """A new run began: what was rewound away is dropped for good, with its
        checkpoints (their seqs are returned, for their refs)."""

        def fn(c: Connection) -> list[int]:
            m = MESSAGES.c
            floor = c.execute(
                select(m.seq)
                .where(m.conversation_id == cid, m.hidden == REWOUND)
                .order_by(m.seq)
                .limit(1)
            ).scalar_one_or_none()
            if floor is None:
                return []
            c.execute(
                update(MESSAGES)
                .where(m.conversation_id == cid, m.hidden == REWOUND)
                .values(hidden=DROPPED)
            )
            k = CHECKPOINTS.c
            seqs = [
                int(r[0])
                for r in c.execute(select(k.seq).where(k.conversation_id == cid, k.seq >= floor))
            ]
            if seqs:
                c.execute(delete(CHECKPOINTS).where(k.conversation_id == cid, k.seq.in_(seqs)))
            return seqs

        return await self._core(fn)

    # -- forks ------------------------------------------------------------------------------
    async def fork_conversation(
        self, user_id: str, src: str, new: str, seq: int, title: str
    ) -> list[StoredCheckpoint]:
        """The conversation ``new`` of ``user_id``: ``src``'s history up to ``seq`` (same
        seqs) and its checkpoints up to there (returned)."""

        def fn(c: Connection) -> list[StoredCheckpoint]:
            now = utcnow()
            c.execute(
                insert(CONVERSATIONS).values(
                    id=new,
                    user_id=user_id,
                    title=title[:200],
                    status="idle",
                    last_seq=seq,
                    created_at=now,
                    updated_at=now,
                )
            )
            m = MESSAGES.c
            rows = c.execute(
                select(MESSAGES)
                .where(m.conversation_id == src, m.seq <= seq, m.hidden != DROPPED)
                .order_by(m.seq)
            ).all()
            if rows:
                copied = []
                for r in rows:
                    values = dict(r._mapping)
                    values.pop("id")
                    values.update(conversation_id=new, hidden=IN_HISTORY)
                    copied.append(values)
                c.execute(insert(MESSAGES), copied)
            k = CHECKPOINTS.c
            kept = [
                _checkpoint(r)
                for r in c.execute(
                    select(CHECKPOINTS)
                    .where(k.conversation_id == src, k.seq <= seq)
                    .order_by(k.seq)
                )
            ]
            if kept:
                c.execute(
                    insert(CHECKPOINTS),
                    [
                        {n: getattr(cp, n) for n in StoredCheckpoint.__slots__}
                        | {"conversation_id": new}
                        for cp in kept
                    ],
                )
            return kept

        return await self._core(fn)

    # -- shares -----------------------------------------------------------------------------
    async def add_share(self, share: StoredShare) -> None:
        values = {k: getattr(share, k) for k in StoredShare.__slots__}

        def fn(c: Connection) -> None:
            c.execute(insert(SHARES).values(**values))

        await self._core(fn)

    async def share_by_token(self, token: str) -> StoredShare | None:
        def fn(c: Connection) -> StoredShare | None:
            r = c.execute(select(SHARES).where(SHARES.c.token == token)).one_or_none()
            return None if r is None else _share(r)

        return await self._core(fn)

    async def revoke_shares(self, cid: str) -> list[str]:
        """Every share link of the conversation gone; their tokens."""

        def fn(c: Connection) -> list[str]:
            tokens = [
                str(r[0])
                for r in c.execute(select(SHARES.c.token).where(SHARES.c.conversation_id == cid))
            ]
            c.execute(delete(SHARES).where(SHARES.c.conversation_id == cid))
            return tokens

        return await self._core(fn)

    async def history_seqs(self, cid: str) -> list[int]:
        """The seqs of the conversation's messages in its history now."""

        def fn(c: Connection) -> list[int]:
            m = MESSAGES.c
            rows = c.execute(
                select(m.seq)
                .where(m.conversation_id == cid, m.hidden == IN_HISTORY)
                .order_by(m.seq)
            )
            return [int(r[0]) for r in rows]

        return await self._core(fn)

    async def messages_at(self, cid: str, seqs: list[int]) -> list[Any]:
        """The conversation's messages with these seqs (whatever their state now)."""
        from backend.store.messages import message_of

        def fn(c: Connection) -> list[Any]:
            m = MESSAGES.c
            out: list[Any] = []
            for i in range(0, len(seqs), 500):
                rows = c.execute(
                    select(MESSAGES)
                    .where(m.conversation_id == cid, m.seq.in_(seqs[i : i + 500]))
                    .order_by(m.seq)
                ).all()
                out += [message_of(r) for r in rows]
            return out

        return await self._core(fn)
