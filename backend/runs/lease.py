"""Instances, leases and recovery.

Every server or worker process is an instance with an id and a lease in the store
(``instances.expires_at``), renewed every third of ``LEASE_SECONDS``. The keeper also:

- recovers, every few seconds: a running run whose owner's lease expired is taken over
  (an atomic claim, so one process does it) and continued from its last checkpoint
  (``take_over``: executed here, or queued again for a worker; past ``RUN_MAX_RESUMES`` it
  is ended ``failed`` with its open messages closed, an ``error`` saying why);
- sweeps the runs that wait for a person: a wait past APPROVAL_TIMEOUT is rejected (the
  run goes on), a wait whose owner died before it let go of the run is released;
- watches this process's runs once a second as a safety net for notifications: a stop
  request in the store stops the run; a run another process ended is dropped here
  (``lost``) without publishing anything more.

An instance on the same host and PID namespace whose process is gone is dead at once (a
restart recovers its predecessor's runs without waiting for the lease).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import threading
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from backend.agent.control import RunControl
    from backend.runtime.base import Runtime
    from backend.store.repo import Store
    from backend.store.rows import InstanceRow, RecoveryScan

log = logging.getLogger(__name__)

CONTROL_SECONDS = 1.0  # how often an owner re-reads its runs' stop flags (safety net)
# how often a process looks for runs whose owner's lease expired (and waits that timed out):
# at most a second after the expiry, so a run resumes within lease expiry + about a second
RECOVER_SECONDS = 1.0


# instances created by this process (tests may hold several managers in one process)
_OURS: set[str] = set()


def new_instance_id(kind: str) -> str:
    iid = f"{kind}-{socket.gethostname()[:40]}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    _OURS.add(iid)
    return iid


def host_identity() -> str:
    """The host name and PID namespace: PIDs compare only within one of these."""
    try:
        ns = os.readlink("/proc/self/ns/pid")
    except OSError:
        ns = "?"
    return f"{socket.gethostname()}|{ns}"


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


class LeaseKeeper:
    """The lease of one instance and the runs it executes, seen through narrow callbacks:
    ``local_runs()`` (the runs executing here, by id), ``stop_local(run_id, lost)`` (stop
    one; ``lost``: another process ended it), ``runtimes()`` (the runtimes made here) and
    ``take_over(run_id, owner)`` (continue a run whose owner ``owner`` died; False when
    another process took it first)."""

    def __init__(
        self,
        store: Store,
        instance_id: str,
        kind: str,
        seconds: float,
        *,
        local_runs: Callable[[], dict[str, RunControl]],
        stop_local: Callable[[str, bool], None],
        runtimes: Callable[[], list[Runtime]],
        take_over: Callable[[str, str], Awaitable[bool]],
        sweep: Callable[[RecoveryScan], Awaitable[int]] | None = None,
    ) -> None:
        self.store = store
        self.iid = instance_id
        self.kind = kind
        self.seconds = seconds
        self.local_runs = local_runs
        self.stop_local = stop_local
        self.runtimes = runtimes
        self.take_over = take_over
        self.sweep = sweep  # runs that wait for a person: timeouts (backend/runs/parking.py)
        self.host = host_identity()
        self._tasks: list[asyncio.Task[None]] = []
        self._thread: threading.Thread | None = None
        self._stopped = threading.Event()
        self._recover_lock = asyncio.Lock()
        self.recovered = 0

    async def start(self) -> None:
        await self.store.renew_instance(self.iid, self.kind, self.seconds, self.host)
        await self.recover()
        self._stopped.clear()
        self._thread = threading.Thread(target=self._renew_loop, name="planact-lease", daemon=True)
        self._thread.start()
        self._tasks = [
            asyncio.create_task(
                self._every(min(self.seconds / 3, RECOVER_SECONDS), self.recover), name="recover"
            ),
            asyncio.create_task(self._every(CONTROL_SECONDS, self.watch), name="watch-runs"),
        ]

    async def stop(self) -> None:
        self._stopped.set()
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join, 10)
            self._thread = None
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        with contextlib.suppress(Exception):
            await self.store.drop_instance(self.iid)

    async def _every(self, seconds: float, fn: object) -> None:
        loop = asyncio.get_running_loop()
        while True:
            before = loop.time()
            await asyncio.sleep(seconds)
            late = loop.time() - before - seconds
            if late > self.seconds / 3:
                log.warning(
                    "the event loop was blocked for %.1f s (lease %.0f s)", late, self.seconds
                )
            try:
                await fn()  # type: ignore[operator]
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s failed", getattr(fn, "__name__", fn))

    def _renew_loop(self) -> None:
        """Renew the lease every third of it, on a thread of its own: the lease says the
        process is alive, whatever its event loop is busy with."""
        while not self._stopped.wait(self.seconds / 3):
            try:
                self.store.renew_instance_sync(self.iid, self.kind, self.seconds, self.host)
            except Exception:
                log.exception("renewing the lease failed")

    async def watch(self) -> None:
        """Safety net for notifications: stop flags and runs taken by recovery."""
        local = self.local_runs()
        if not local:
            return
        flags = await self.store.run_flags(list(local))
        for rid, control in local.items():
            if control.ending:
                continue
            status, stop, owner = flags.get(rid, ("missing", False, None))
            if status != "running" or owner != self.iid:
                log.warning("run %s was ended elsewhere (%s); dropping it here", rid, status)
                self.stop_local(rid, True)
            elif stop and not control.stop_requested:
                self.stop_local(rid, False)

    async def recover(self) -> int:
        """Take over every running run whose owner's lease expired. Returns how many."""
        async with self._recover_lock:
            scan = await self.store.recovery_scan(self.seconds)
            if await self._expire_dead_neighbours(scan.instances):
                scan = await self.store.recovery_scan(self.seconds)  # their runs: orphans now
            count = 0
            for run in scan.orphaned_runs:
                if not await self.take_over(run.run_id, run.owner):
                    continue  # another process recovers it, or its owner came back
                log.warning("run %s lost its owner %s: taken over", run.run_id, run.owner)
                count += 1
            self.recovered += count
            if self.sweep is not None:
                await self.sweep(scan)
            await self._forget_dead_instances(scan.forgettable)
            return count

    async def _expire_dead_neighbours(self, instances: list[InstanceRow]) -> bool:
        """End the lease of each instance on this host whose process is gone; whether any."""
        expired = False
        for inst in instances:
            if inst.id == self.iid or not inst.live or inst.host != self.host:
                continue
            pid = inst.pid
            if (pid == os.getpid() and inst.id not in _OURS) or (
                pid != os.getpid() and not pid_alive(pid)
            ):
                await self.store.expire_instance(inst.id)
                expired = True
        return expired

    async def _forget_dead_instances(self, dead: list[str]) -> None:
        """Instances whose lease ended long ago and that own no running run (the scan's
        ``forgettable``): their sandboxes removed, their rows deleted."""
        if not dead:
            return
        for runtime in self.runtimes():
            try:  # the docker runtime removes those owners' sandboxes
                await runtime.reap_owners(dead)
            except Exception:
                log.exception("reaping the sandboxes of %s failed", dead)
        await self.store.delete_instances(dead)
