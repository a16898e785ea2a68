"""Who runs what: instances and their leases, orphaned runs, claims and stop requests."""

from __future__ import annotations

import os
import socket
from datetime import timedelta

from sqlalchemy import Connection, bindparam, delete, insert, select, update

from backend.store import recovery
from backend.store.base import (
    ACTIVE,
    CONTROL_CHANNEL,
    INSTANCES,
    RUNS,
    StoreBase,
    fenced_update,
)
from backend.store.rows import InstanceRow, OrphanedRun, StopTarget
from backend.store.tables import utcnow

# the owner's once-a-second look at its runs (backend/runs/lease.py), built once
_RUN_FLAGS = select(RUNS.c.id, RUNS.c.status, RUNS.c.stop_requested, RUNS.c.owner).where(
    RUNS.c.id.in_(bindparam("ids", expanding=True))
)


class SqlLeases(StoreBase):
    """Instances, their leases and the ownership of running runs."""

    # -- ownership: instances, leases, stop requests --------------------------------------
    async def renew_instance(
        self, iid: str, kind: str, lease_seconds: float, host: str = ""
    ) -> None:
        await self._quick(lambda c: self._renew(c, iid, kind, lease_seconds, host))

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

    async def instances(self) -> list[InstanceRow]:
        return await self._quick(lambda c: recovery.instances(c, utcnow()))

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
        """Instances safe to forget (store/recovery.py ``forgettable``)."""
        return await self._quick(lambda c: recovery.forgettable(c, utcnow(), grace_seconds))

    async def delete_instances(self, ids: list[str]) -> None:
        if ids:
            await self._core(lambda c: c.execute(delete(INSTANCES).where(INSTANCES.c.id.in_(ids))))

    async def orphaned_runs(self) -> list[OrphanedRun]:
        """Running runs whose owner's lease expired (or whose owner is unknown)."""
        return await self._quick(lambda c: recovery.orphaned_runs(c, utcnow()))

    async def claim_run(self, run_id: str, owner: str, expected: str | None) -> bool:
        """Take a running run from ``expected`` (None: a queued run nobody took; never a run
        parked on a wait, see store/waits.py)."""

        def fn(c: Connection) -> bool:
            was = RUNS.c.owner.is_(None) if expected is None else RUNS.c.owner == expected
            q = fenced_update(run_id, was, RUNS.c.wait_uuid.is_(None))
            return bool(c.execute(q.values(owner=owner)).rowcount)

        return await self._core(fn)

    async def request_stop(self, run_id: str) -> StopTarget | None:
        """Record a stop request on a running run and tell its owner (same transaction).
        Returns its owner and conversation, or None when the run is not running."""

        def fn(c: Connection) -> StopTarget | None:
            row = c.execute(
                fenced_update(run_id)
                .values(stop_requested=True)
                .returning(RUNS.c.owner, RUNS.c.conversation_id)
            ).one_or_none()
            if row is None:
                return None
            self._notify(c, CONTROL_CHANNEL, f"stop:{run_id}")
            return StopTarget(owner=row[0], conversation_id=row[1])

        return await self._core(fn)

    async def run_flags(self, run_ids: list[str]) -> dict[str, tuple[str, bool, str | None]]:
        """run id -> (status, stop requested, owner) for the given runs."""
        if not run_ids:
            return {}

        def fn(c: Connection) -> dict[str, tuple[str, bool, str | None]]:
            rows = c.execute(_RUN_FLAGS, {"ids": run_ids})
            return {r[0]: (r[1], bool(r[2]), r[3]) for r in rows}

        return await self._quick(fn)

    async def running_run_of(self, cid: str) -> str | None:
        def fn(c: Connection) -> str | None:
            return c.execute(
                select(RUNS.c.id).where(RUNS.c.conversation_id == cid, RUNS.c.status == ACTIVE)
            ).scalar_one_or_none()

        return await self._core(fn)
