"""RunContext: what every stage of one run needs, and the two things stages do: publish
messages and call the model."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from backend.agent.budget import Budget
from backend.agent.live import DeltaSink, Live
from backend.llm.base import LLM, Completion, DeltaCallback, LLMError
from backend.messages.kinds import MessageKind
from backend.messages.message import Message
from backend.messages.paths import relative_paths

if TYPE_CHECKING:
    from backend.agent.routing import Specialist
    from backend.config import Settings
    from backend.messages.bus import Bus
    from backend.runtime.base import Runtime
    from backend.store.repo import Store

log = logging.getLogger(__name__)

Listener = Callable[[Message], Awaitable[None] | None]


async def _store_through_cancellation(store: Store, msg: Message) -> tuple[Message, bool]:
    """Store ``msg`` even when the run is cancelled meanwhile (the write runs on the store's
    thread and completes anyway): a stored `running` message must be known to the run, so
    that its final partner is published when the run ends. Returns (stored, cancelled)."""
    write = asyncio.ensure_future(store.append_message(msg))
    cancelled = False
    while True:
        try:
            return await asyncio.shield(write), cancelled
        except asyncio.CancelledError:
            cancelled = True
            if write.done() and write.cancelled():
                raise


async def _drain_deltas(live: Live) -> bool:
    """Send the pending live deltas (best effort). Returns True when the run was cancelled
    meanwhile: the caller still stores its message, then lets the cancellation through."""
    try:
        await live.drain()
    except asyncio.CancelledError:
        return True
    except Exception as exc:
        log.warning("could not send live deltas: %s", exc)
    return False


class RunStopped(BaseException):
    """A stop was requested: raised by ``RunContext.check_stop`` before a model call or an
    action. A BaseException so that no ``except Exception`` on the way swallows it."""


@dataclass
class RunContext:
    settings: Settings
    store: Store
    bus: Bus
    llm: LLM
    runtime: Runtime
    user_id: str
    conversation_id: str
    run_id: str
    goal: str
    mode: str
    workspace: Path
    listener: Listener | None = None
    specialist: Specialist | None = None
    history: list[dict[str, str]] = field(default_factory=list)
    written: set[str] = field(default_factory=set)
    snapshot: dict[str, tuple[int, int]] = field(default_factory=dict)
    shutting_down: bool = False
    # -- stop as a level (backend/runs): set by the owner, checked before every model call
    # and every action; `ending` once the run publishes its end; `lost` when another
    # process failed this run (its owner's lease expired): nothing more is published.
    stop_requested: bool = False
    ending: bool = False
    lost: bool = False
    open_actions: dict[str, Message] = field(default_factory=dict)
    open_tasks: set[str] = field(default_factory=set)  # task ids published `running`
    notifier: Any = None  # backend.runs.notify.Notifier (live deltas)

    budget: Budget = field(default_factory=Budget)  # what the run spent (RUN_MAX_*)
    # issue 13: the model the person picked for this run (None: LLM_MODEL / specialists)
    model: str | None = None
    # issue 13: workspace files the person uploaded (told to the planner and thinking)
    inputs: list[str] = field(default_factory=list)
    # live deltas (CONTRACT section 3): coalesced, to the notifier and `delta_listener`
    # (the CLI); made only while someone follows the run
    delta_listener: DeltaSink | None = None
    live: Live = field(default_factory=Live)

    def check_stop(self) -> None:
        if (self.stop_requested or self.shutting_down or self.lost) and not self.ending:
            raise RunStopped(self.run_id)

    async def publish_delta(self, payload: dict[str, Any]) -> None:
        """A live, unstored delta (see CONTRACT section 3) to every reader of the run."""
        if self.notifier is not None and not self.lost:
            await self.notifier.publish_delta(self.run_id, payload)

    def __post_init__(self) -> None:
        if self.notifier is not None or self.delta_listener is not None:
            self.live = Live(
                self.delta_listener,
                wanted=self._wants_deltas,
                publish=self.publish_delta if self.notifier is not None else None,
            )

    def _wants_deltas(self) -> bool:
        if self.delta_listener is not None:
            return True
        notifier = self.notifier
        return notifier is not None and (
            bool(notifier.cross_process) or notifier.bus.has_readers(self.run_id)
        )

    async def publish(self, msg: Message) -> Message:
        """Store first, then notify: every reader reads from the store."""
        msg.conversation_id = self.conversation_id
        msg.run_id = self.run_id
        if msg.role == "assistant":  # issue 13: never show the server's workspace path
            msg.content = relative_paths(msg.content, self.workspace)
            msg.meta.content = relative_paths(msg.meta.content, self.workspace)
        if self.lost:  # another process ended this run: its messages are closed
            return msg
        # the message's pending live deltas go out before it: to other processes too, whose
        # notification of the message is sent when it is stored
        self.live.flush(msg.uuid)
        cancelled_early = await _drain_deltas(self.live)
        stored, cancelled = await _store_through_cancellation(self.store, msg)
        cancelled = cancelled or cancelled_early
        if msg.meta.action_type == MessageKind.TASK:  # tasks pair by task id
            if msg.status == "running":
                self.open_tasks.add(str(msg.meta.task_id))
            else:
                self.open_tasks.discard(str(msg.meta.task_id))
        elif msg.status == "running":
            self.open_actions[msg.uuid] = stored
        else:
            self.open_actions.pop(msg.uuid, None)
        self.live.published(stored)
        self.bus.publish(self.run_id, stored)
        if cancelled:  # the write is done and tracked: now let the cancellation through
            raise asyncio.CancelledError()
        if self.listener is not None:
            result = self.listener(stored)
            if result is not None:
                await result
        return stored

    async def call_model(
        self,
        stage: str,
        messages: list[dict[str, Any]],
        *,
        specialist: bool = False,
        on_delta: DeltaCallback | None = None,
    ) -> Completion:
        """Call the model for ``stage``; the specialist's model when asked, falling back to
        the default model if it errors. Usage is recorded per stage. Raises BudgetExceeded
        when a run budget is used up."""
        self.check_stop()
        self.budget.check(self.settings)
        model = self.specialist.model if (specialist and self.specialist) else None
        if self.model:  # a model the person picked wins, with no silent fallback
            model = self.model
        try:
            completion = await self.llm.complete(
                stage=stage, messages=messages, model=model, on_delta=on_delta
            )
        except LLMError as exc:  # also a misconfigured specialist model
            if not model or model == self.llm.default_model or model == self.model:
                raise
            log.warning("specialist model %s failed (%s); using the default", model, exc)
            self.check_stop()
            completion = await self.llm.complete(stage=stage, messages=messages, on_delta=on_delta)
        self.budget.add(completion)
        await self.store.record_usage(
            self.conversation_id,
            self.run_id,
            stage,
            completion.model or model or self.llm.default_model or "",
            completion.prompt_tokens,
            completion.completion_tokens,
            completion.cost,
        )
        return completion
