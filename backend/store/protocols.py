"""What the rest of the product may ask of the Store, one Protocol per aggregate.

A caller that needs only messages takes a :class:`MessageStore`, the run machinery a
:class:`RunStore` and a :class:`LeaseStore`, and so on; :class:`StoreProtocol` is all of
them. The one implementation is :class:`backend.store.repo.Store` (SQLite or PostgreSQL);
mypy checks below that it satisfies each Protocol, and the contract suite in tests/store/
runs over both databases against these Protocols.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from backend.messages.message import Message


@runtime_checkable
class ConversationStore(Protocol):
    """Conversations, their titles and the files of their workspace."""

    async def create_conversation(self, user_id: str, title: str) -> str: ...
    async def get_conversation(self, user_id: str, cid: str) -> dict[str, Any] | None: ...
    async def list_conversations(self, user_id: str, q: str = "") -> list[dict[str, Any]]:
        """Newest first; ``q`` keeps those whose title or one of whose goals contains it
        (case-insensitive, taken literally)."""

    async def delete_conversation(self, user_id: str, cid: str, origin: str = "") -> bool:
        """Delete the conversation and all it holds; announce it to every process (``origin``:
        the instance id of the one deleting, which has dropped its sandboxes already)."""

    async def rename_conversation(self, user_id: str, cid: str, title: str) -> bool: ...
    async def retitle_if_default(self, cid: str, defaults: tuple[str, ...], title: str) -> bool:
        """Set the title unless a person chose one (the title is still one of
        ``defaults``: empty or the goal's first words)."""

    async def record_uploads(self, cid: str, files: list[tuple[str, int]]) -> None:
        """Files a person uploaded: file rows with run id ``upload`` (a run that changes one
        later takes the row over)."""

    async def uploaded_files(self, cid: str) -> list[str]: ...
    async def run_files(self, run_id: str) -> list[tuple[str, int]]: ...
    async def record_files(self, cid: str, run_id: str, files: list[tuple[str, int]]) -> None: ...


@runtime_checkable
class RunStore(Protocol):
    """Runs and their tasks: at most one running run per conversation."""

    async def start_run(
        self,
        user_id: str,
        cid: str,
        goal: str,
        mode: str,
        runtime: str,
        owner: str | None = None,
        model: str = "",
        mcp_servers: list[str] | None = None,
        approval: str = "never",
        can_ask: bool = True,
    ) -> str:
        """Create a run owned by ``owner`` (None: queued for a worker); raises ConflictError
        if one is active (the partial unique index decides across processes),
        NotFoundError if no conversation."""

    async def get_run(self, run_id: str, user_id: str | None = None) -> dict[str, Any] | None: ...
    async def run_for_execution(self, run_id: str) -> dict[str, Any] | None:
        """The run with its conversation's user id (what an executor needs to run it)."""

    async def set_run_task_type(self, run_id: str, task_type: str) -> None: ...
    async def end_run(
        self, run_id: str, status: str, error: str = "", *, owner: str | None = None
    ) -> bool:
        """End a run that is still running (and, with ``owner``, still owned by it).
        Returns False when it had already ended: an ended run never changes again."""

    async def set_run_trace(self, run_id: str, trace_context: str) -> None:
        """Store the run's trace context (backend/observe)."""

    async def save_checkpoint(
        self,
        run_id: str,
        checkpoint: str,
        transcript: str | None = None,
        owner: str | None = None,
        run_fields: Mapping[str, str] | None = None,
    ) -> None:
        """``owner``: fenced (RunNotOwned when another process owns the run now).
        ``run_fields``: the run's ``start_files``/``task_type``, in the same UPDATE."""

    async def save_start_files(self, run_id: str, files: str) -> None: ...
    async def take_over(self, run_id: str, expected: str, owner: str | None) -> int | None:
        """Take a running run from its dead owner (``owner`` None: queued again), counting
        the resume; the resumes so far, or None when another process took it first."""

    async def count_repeated_call(self, run_id: str) -> None: ...
    async def running_tasks(self, run_id: str) -> list[dict[str, Any]]: ...
    async def save_tasks(self, run_id: str, cid: str, tasks: list[dict[str, str]]) -> None: ...
    async def update_task(self, task_id: str, status: str, result: str = "") -> None: ...


@runtime_checkable
class LeaseStore(Protocol):
    """Which process owns which running run: instances, leases, claims, stop requests."""

    async def renew_instance(
        self, iid: str, kind: str, lease_seconds: float, host: str = ""
    ) -> None: ...
    def renew_instance_sync(self, iid: str, kind: str, lease_seconds: float, host: str) -> None:
        """The same from any thread (the lease keeper's own): a busy event loop does not
        cost a live process its lease."""

    async def instances(self) -> list[dict[str, Any]]: ...
    async def expire_instance(self, iid: str) -> None:
        """End an instance's lease now (it is known to be dead)."""

    async def drop_instance(self, iid: str) -> None: ...
    async def live_instances(self) -> set[str]: ...
    async def expired_instances(self, grace_seconds: float) -> list[str]:
        """Instances whose lease ended more than ``grace_seconds`` ago and that own no
        running run any more (their runs were recovered): safe to forget."""

    async def delete_instances(self, ids: list[str]) -> None: ...
    async def orphaned_runs(self) -> list[dict[str, Any]]:
        """Running runs whose owner's lease expired (or whose owner is unknown)."""

    async def claim_run(self, run_id: str, owner: str, expected: str | None) -> bool:
        """Take a running run from ``expected`` (None: a queued run nobody took)."""

    async def request_stop(self, run_id: str) -> dict[str, Any] | None:
        """Record a stop request on a running run and tell its owner (same transaction).
        Returns ``{"owner", "conversation_id"}``, or None when the run is not running."""

    async def run_flags(self, run_ids: list[str]) -> dict[str, tuple[str, bool, str | None]]:
        """run id -> (status, stop requested, owner) for the given runs."""

    async def running_run_of(self, cid: str) -> str | None: ...


@runtime_checkable
class MessageStore(Protocol):
    """The messages of a conversation, by seq."""

    async def append_message(
        self,
        msg: Message,
        checkpoint: str | None = None,
        wait: dict[str, Any] | None = None,
        owner: str | None = None,
        run_fields: Mapping[str, str] | None = None,
    ) -> Message:
        """Store a message, assigning its ``seq`` (and the run's checkpoint, its
        ``run_fields`` and the wait it parks on, same transaction). ``owner``: only while
        it owns the running run (RunNotOwned otherwise, nothing written). Returns the
        stored message."""

    async def messages(
        self,
        cid: str,
        *,
        run_id: str | None = None,
        after: int = 0,
        limit: int = 500,
        action_types: tuple[str, ...] | None = None,
    ) -> list[Message]: ...
    async def open_messages(self, run_id: str) -> list[Message]:
        """The run's `running` action messages that have no final partner yet."""


@runtime_checkable
class UsageStore(Protocol):
    """Token usage and cost of model calls."""

    async def record_usage(
        self,
        cid: str,
        run_id: str,
        stage: str,
        model: str,
        prompt_tokens: int,
        completion_tokens: int,
        cost: float | None,
    ) -> None: ...
    async def run_usage(self, run_id: str) -> dict[str, Any]: ...


@runtime_checkable
@runtime_checkable
class WaitStore(Protocol):
    """Runs parked while they wait for a person (store/waits.py)."""

    async def release_parked(self, run_id: str, owner: str, uuid: str) -> bool | None: ...
    async def end_wait(
        self, run_id: str, uuid: str, kind: str, owner: str | None, answer: str, partner: Message
    ) -> Message | None: ...
    async def wait_message(self, run_id: str, uuid: str) -> tuple[Message, bool] | None: ...
    async def take_parked(self, run_id: str, owner: str, expected: str | None = None) -> bool: ...
    async def orphaned_waits(self) -> list[dict[str, Any]]: ...
    async def expired_waits(self, now: datetime | None = None) -> list[dict[str, str]]: ...
    async def wait_answer(self, run_id: str) -> str | None: ...


class StoreProtocol(
    ConversationStore, RunStore, LeaseStore, MessageStore, UsageStore, WaitStore, Protocol
):
    """The whole Store."""

    def migrate(self) -> None: ...
    async def close(self) -> None: ...


if TYPE_CHECKING:  # mypy: the Store satisfies every Protocol (a mismatch fails `make typecheck`)
    from backend.store.repo import Store

    def _store_satisfies_every_protocol(store: Store) -> None:
        conversations: ConversationStore = store
        runs: RunStore = store
        leases: LeaseStore = store
        messages: MessageStore = store
        usage: UsageStore = store
        waits: WaitStore = store
        whole: StoreProtocol = store
        del conversations, runs, leases, messages, usage, waits, whole
