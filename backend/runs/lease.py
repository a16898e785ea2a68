"""Instances, leases and recovery.

Every server or worker process is an instance with an id and a lease in the store
(``instances.expires_at``), renewed every third of ``LEASE_SECONDS``. The keeper also:

- recovers, every few seconds: a running run whose owner's lease expired is taken over
  (an atomic claim, so one process does it) and ended ``failed`` with its open messages
  closed, its running tasks failed, an ``error`` and a ``finish_summery``;
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
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from backend.messages.kinds import FILE_ACTIONS, MessageKind
from backend.messages.message import Message
from backend.workspace import file_entry

if TYPE_CHECKING:
    from backend.runs.manager import RunManager

log = logging.getLogger(__name__)

CONTROL_SECONDS = 1.0  # how often an owner re-reads its runs' stop flags (safety net)
INTERRUPTED = (
    "The process running this run crashed or restarted before the run ended, so the run "
    "was interrupted. Send the goal again to continue."
)


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
    def __init__(self, manager: RunManager) -> None:
        self.manager = manager
        self.store = manager.store
        self.iid = manager.instance_id
        self.seconds = manager.settings.lease_seconds
        self.host = host_identity()
        self._tasks: list[asyncio.Task[None]] = []
        self._thread: threading.Thread | None = None
        self._stopped = threading.Event()
        self._recover_lock = asyncio.Lock()
        self.recovered = 0

    async def start(self) -> None:
        await self.store.renew_instance(self.iid, self.manager.kind, self.seconds, self.host)
        await self.recover()
        self._stopped.clear()
        self._thread = threading.Thread(target=self._renew_loop, name="planact-lease", daemon=True)
        self._thread.start()
        self._tasks = [
            asyncio.create_task(self._every(self.seconds / 3, self.recover), name="recover"),
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
                self.store.renew_instance_sync(self.iid, self.manager.kind, self.seconds, self.host)
            except Exception:
                log.exception("renewing the lease failed")

    async def watch(self) -> None:
        """Safety net for notifications: stop flags and runs taken by recovery."""
        local = self.manager.local_runs()
        if not local:
            return
        flags = await self.store.run_flags(list(local))
        for rid, ctx in local.items():
            if ctx.ending:
                continue
            status, stop, owner = flags.get(rid, ("missing", False, None))
            if status != "running" or owner != self.iid:
                log.warning("run %s was ended elsewhere (%s); dropping it here", rid, status)
                self.manager._stop_local(rid, lost=True)
            elif stop and not ctx.stop_requested:
                self.manager._stop_local(rid)

    async def recover(self) -> int:
        """Fail every running run whose owner's lease expired. Returns how many."""
        async with self._recover_lock:
            await self._expire_dead_neighbours()
            count = 0
            for run in await self.store.orphaned_runs():
                if not await self.store.claim_run(run["run_id"], self.iid, run["owner"]):
                    continue  # another process recovers it, or its owner came back
                log.warning("run %s lost its owner %s: failing it", run["run_id"], run["owner"])
                await close_run(self.manager, run["run_id"], "failed", INTERRUPTED)
                count += 1
            self.recovered += count
            await self._forget_dead_instances()
            return count

    async def _expire_dead_neighbours(self) -> None:
        for inst in await self.store.instances():
            if inst["id"] == self.iid or not inst["live"] or inst["host"] != self.host:
                continue
            pid = int(inst["pid"])
            if (pid == os.getpid() and inst["id"] not in _OURS) or (
                pid != os.getpid() and not pid_alive(pid)
            ):
                await self.store.expire_instance(inst["id"])

    async def _forget_dead_instances(self) -> None:
        dead = await self.store.expired_instances(self.seconds)
        if not dead:
            return
        for runtime in self.manager.loaded_runtimes():
            try:  # the docker runtime removes those owners' sandboxes
                await runtime.reap_owners(dead)
            except Exception:
                log.exception("reaping the sandboxes of %s failed", dead)
        await self.store.delete_instances(dead)


async def close_run(manager: RunManager, run_id: str, status: str, reason: str) -> bool:
    """End a run this instance owns but does not execute (recovered, or queued and stopped):
    close its open messages and tasks, publish `error` or `stop` and `finish_summery`."""
    store = manager.store
    run = await store.run_for_execution(run_id)
    if run is None or run["status"] != "running":
        return False
    cid = run["conversation_id"]

    async def publish(msg: Message) -> None:
        msg.conversation_id, msg.run_id = cid, run_id
        stored = await store.append_message(msg)
        manager.bus.publish(run_id, stored)

    stopped = status == "stopped"
    note = "Stopped before it finished." if stopped else f"Interrupted: {reason}"
    for open_msg in await store.open_messages(run_id):
        await publish(
            Message.build(
                open_msg.meta.action_type,
                note,
                status="failure",
                task_id=open_msg.meta.task_id,
                filepath=open_msg.meta.filepath,
                uuid=open_msg.uuid,
                meta_content=open_msg.meta.content,
            )
        )
    for task in await store.running_tasks(run_id):
        await store.update_task(task["id"], "failed", "stopped" if stopped else reason)
        task["status"] = "failed"
        await publish(
            Message.build(
                MessageKind.TASK, task["title"], status="failure", task_id=task["id"], json=[task]
            )
        )
    if stopped:
        await publish(Message.build(MessageKind.STOP, "The run was stopped.", status="failure"))
    else:
        await publish(Message.build(MessageKind.ERROR, reason, status="failure"))
    files = await _files_of(manager, run)
    head = "The run was stopped." if stopped else f"The run failed. {reason}"
    await publish(Message.build(MessageKind.FINISH_SUMMERY, head, json=files))
    ended = await store.end_run(run_id, status, reason, owner=manager.instance_id)
    manager.bus.notify(run_id)
    return ended


async def _files_of(manager: RunManager, run: dict[str, object]) -> list[dict[str, object]]:
    """Files the run recorded, or wrote with a successful action, that still exist."""
    store = manager.store
    rid, cid = str(run["run_id"]), str(run["conversation_id"])
    paths = {p for p, _ in await store.run_files(rid)}
    for msg in await store.messages(cid, run_id=rid, limit=100_000, action_types=FILE_ACTIONS):
        if msg.status == "success" and msg.meta.filepath:
            paths.add(msg.meta.filepath)
    workspace = manager.workspace(str(run["user_id"]), cid)

    def sizes() -> list[tuple[str, int]]:
        out = []
        for p in sorted(paths):
            full = Path(workspace) / p
            if full.is_file() and not full.is_symlink():
                out.append((p, full.stat().st_size))
        return out

    found = await anyio.to_thread.run_sync(sizes)
    if found:
        await store.record_files(cid, rid, found)
    return [file_entry(cid, p, size) for p, size in found]
