"""The reads of a process's recovery round (backend/runs/lease.py), once a second on every
live process: who is alive, which runs and waits lost their owner, which waits timed out,
which instances can be forgotten.

The statements are built once (a statement made per call costs more to build and key
than these small reads cost to run), and :meth:`SqlRecovery.recovery_scan` runs them all
in one transaction: one round is one commit on the loop, not five.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import Connection, bindparam, select

from backend.store.base import ACTIVE, INSTANCES, RUNS, StoreBase
from backend.store.rows import ExpiredWait, InstanceRow, OrphanedRun, OrphanedWait, RecoveryScan
from backend.store.tables import utcnow

_i, _r = INSTANCES.c, RUNS.c
# the run's owner holds a live lease at :now
_OWNER_LIVE = select(_i.id).where(_i.id == _r.owner, _i.expires_at > bindparam("now")).exists()
_INSTANCES = select(_i.id, _i.kind, _i.host, _i.pid, _i.expires_at)
_ORPHANED_RUNS = select(_r.id, _r.conversation_id, _r.owner).where(
    _r.status == ACTIVE,
    _r.owner.is_not(None),
    _r.wait_uuid.is_(None),  # a parked run: store/waits.py
    ~_OWNER_LIVE,
)
_ORPHANED_WAITS = select(_r.id, _r.owner, _r.wait_uuid).where(
    _r.status == ACTIVE, _r.wait_uuid.is_not(None), _r.owner.is_not(None), ~_OWNER_LIVE
)
_EXPIRED_WAITS = select(_r.id, _r.wait_uuid, _r.wait_kind).where(
    _r.status == ACTIVE, _r.wait_uuid.is_not(None), _r.wait_until < bindparam("now")
)
_OWNS_A_RUN = select(_r.id).where(_r.owner == _i.id, _r.status == ACTIVE).exists()
_FORGETTABLE = select(_i.id).where(_i.expires_at < bindparam("cutoff"), ~_OWNS_A_RUN)


def instances(c: Connection, now: datetime) -> list[InstanceRow]:
    return [
        InstanceRow(id=r[0], kind=r[1], host=r[2], pid=int(r[3]), live=r[4] > now)
        for r in c.execute(_INSTANCES)
    ]


def orphaned_runs(c: Connection, now: datetime) -> list[OrphanedRun]:
    """Running runs whose owner's lease expired (or whose owner is unknown)."""
    rows = c.execute(_ORPHANED_RUNS, {"now": now})
    return [OrphanedRun(run_id=r[0], conversation_id=r[1], owner=r[2]) for r in rows]


def orphaned_waits(c: Connection, now: datetime) -> list[OrphanedWait]:
    """Parked runs whose owner died before it let go of them (its lease expired)."""
    rows = c.execute(_ORPHANED_WAITS, {"now": now})
    return [OrphanedWait(run_id=r[0], owner=r[1], uuid=r[2]) for r in rows]


def expired_waits(c: Connection, now: datetime) -> list[ExpiredWait]:
    """Waits past their deadline."""
    rows = c.execute(_EXPIRED_WAITS, {"now": now})
    return [ExpiredWait(run_id=r[0], uuid=r[1], kind=r[2]) for r in rows]


def forgettable(c: Connection, now: datetime, grace_seconds: float) -> list[str]:
    """Instances whose lease ended more than ``grace_seconds`` ago and that own no running
    run any more (their runs were recovered): safe to forget."""
    cutoff = now - timedelta(seconds=grace_seconds)
    return [r[0] for r in c.execute(_FORGETTABLE, {"cutoff": cutoff})]


class SqlRecovery(StoreBase):
    """A recovery round's reads in one transaction."""

    async def recovery_scan(self, grace_seconds: float) -> RecoveryScan:
        """Everything a recovery round looks at, as of one moment (``grace_seconds``: how
        long an expired instance is kept, see :func:`forgettable`)."""

        def fn(c: Connection) -> RecoveryScan:
            now = utcnow()
            return RecoveryScan(
                instances=instances(c, now),
                orphaned_runs=orphaned_runs(c, now),
                orphaned_waits=orphaned_waits(c, now),
                expired_waits=expired_waits(c, now),
                forgettable=forgettable(c, now, grace_seconds),
            )

        return await self._quick(fn)
