"""The rows the store hands to the run machinery (never sent as they are): a run to
execute, runs and waits whose owner died, the instances, where a stop request goes, the
previews.

Frozen dataclasses: read on every execution and every lease round, checked by mypy, cheap
to build (the wire's shapes are pydantic models: backend/store/shapes.py)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True, slots=True)
class RunToExecute:
    """A run with what a process needs to execute it (``Store.run_for_execution``), or as
    the process that started it wrote it (``new_conversation``: no history to read)."""

    run_id: str
    conversation_id: str
    user_id: str
    goal: str
    mode: str
    runtime: str
    status: str  # as RunRow's: `waiting` for a run parked on a wait
    owner: str | None
    stop_requested: bool
    model: str
    mcp_servers: list[str] | None
    approval: str
    can_ask: bool
    checkpoint: str | None = None
    start_files: str | None = None
    transcript: str | None = None
    trace_context: str | None = None
    new_conversation: bool = False


@dataclass(frozen=True, slots=True)
class OrphanedRun:
    """A running run whose owner's lease expired."""

    run_id: str
    conversation_id: str
    owner: str


@dataclass(frozen=True, slots=True)
class OrphanedWait:
    """A run parked on the wait ``uuid`` whose owner died before it let go of it."""

    run_id: str
    owner: str
    uuid: str


@dataclass(frozen=True, slots=True)
class ExpiredWait:
    """A wait past its deadline (APPROVAL_TIMEOUT)."""

    run_id: str
    uuid: str
    kind: str


@dataclass(frozen=True, slots=True)
class InstanceRow:
    """A server or worker process and whether its lease is live."""

    id: str
    kind: str
    host: str
    pid: int
    live: bool


@dataclass(frozen=True, slots=True)
class RecoveryScan:
    """What a process's recovery round reads (backend/runs/lease.py), in one transaction:
    the instances, running runs and parked runs whose owner's lease expired, waits past
    their deadline, and instances ``forgettable`` (lease ended long ago, no running run)."""

    instances: list[InstanceRow]
    orphaned_runs: list[OrphanedRun]
    orphaned_waits: list[OrphanedWait]
    expired_waits: list[ExpiredWait]
    forgettable: list[str]


@dataclass(frozen=True, slots=True)
class StopTarget:
    """Where a stop request recorded on a running run goes: its owner (None: queued or
    parked) and its conversation."""

    owner: str | None
    conversation_id: str


@dataclass(frozen=True, slots=True)
class StoredPreview:
    """A preview as stored (backend/previews): a service (``kind`` "service", hosted by
    ``owner``) or the conversation's static pages (``kind`` "files"); ``state`` as read
    (a live service whose owner's lease expired reads ``stopped``)."""

    id: str
    conversation_id: str
    user_id: str
    kind: str
    name: str
    port: int
    path: str
    command: str
    runtime: str
    state: str
    owner: str | None
    socket: str
    token: str
    token_expires: datetime
    started_at: datetime
    last_request_at: datetime
    stop_requested: bool
    log: list[str]
