"""RunContext: one run as its stages see it. ``deps`` (given by the executing process),
``state`` (the run's choices and progress: plain, serialisable), ``control`` (stop flags
set by the owner), and the two things stages do: publish messages and call the model."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any

from backend.agent.control import RunControl
from backend.agent.deps import RunDeps
from backend.agent.live import DeltaSink, Live
from backend.agent.publisher import Publisher
from backend.agent.state import RunState
from backend.llm.base import Completion, DeltaCallback, LLMError
from backend.messages.kinds import MessageKind
from backend.messages.message import Message
from backend.messages.paths import relative_paths

log = logging.getLogger(__name__)


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


@dataclass
class RunContext:
    deps: RunDeps
    state: RunState
    publisher: Publisher
    control: RunControl
    # live deltas (CONTRACT section 3): coalesced, to the notifier and `delta_listener`
    # (the CLI); made only while someone follows the run
    delta_listener: DeltaSink | None = None
    live: Live = field(default_factory=Live)

    def __post_init__(self) -> None:
        self.live = Live(self.delta_listener, wanted=self._wants_deltas, publish=self.publish_delta)

    @property
    def run_id(self) -> str:
        return self.state.run_id

    def check_stop(self) -> None:
        self.control.check_stop()

    async def publish_delta(self, payload: dict[str, Any]) -> None:
        """A live, unstored delta (see CONTRACT section 3) to every reader of the run."""
        if not self.control.lost:
            await self.deps.notifier.publish_delta(self.run_id, payload)

    def _wants_deltas(self) -> bool:
        if self.delta_listener is not None:
            return True
        notifier = self.deps.notifier
        return bool(notifier.cross_process) or notifier.bus.has_readers(self.run_id)

    async def publish(self, msg: Message) -> Message:
        """Through the run's Publisher (store first, then notify); the message's pending
        live deltas go out before it, and the run keeps track of what it left open."""
        if msg.role == "assistant":  # never show the server's workspace path
            msg.content = relative_paths(msg.content, self.state.workspace)
            msg.meta.content = relative_paths(msg.meta.content, self.state.workspace)
        if self.control.lost:  # another process ended this run: its messages are closed
            msg.conversation_id, msg.run_id = self.state.conversation_id, self.run_id
            return msg
        # to other processes too, whose notification of the message is sent when stored
        self.live.flush(msg.uuid)
        cancelled = await _drain_deltas(self.live)
        return await self.publisher.publish(msg, self._track, cancelled=cancelled)

    def _track(self, stored: Message) -> None:
        state = self.state
        if stored.meta.action_type == MessageKind.TASK:  # tasks pair by task id
            if stored.status == "running":
                state.open_tasks.add(str(stored.meta.task_id))
            else:
                state.open_tasks.discard(str(stored.meta.task_id))
        elif stored.status == "running":
            state.open_actions[stored.uuid] = stored
        else:
            state.open_actions.pop(stored.uuid, None)
        self.live.published(stored)

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
        state, llm = self.state, self.deps.llm
        self.check_stop()
        state.budget.check(self.deps.settings)
        model = state.specialist.model if (specialist and state.specialist) else None
        if state.model:  # a model the person picked wins, with no silent fallback
            model = state.model
        try:
            completion = await llm.complete(
                stage=stage, messages=messages, model=model, on_delta=on_delta
            )
        except LLMError as exc:  # also a misconfigured specialist model
            if not model or model == llm.default_model or model == state.model:
                raise
            log.warning("specialist model %s failed (%s); using the default", model, exc)
            self.check_stop()
            completion = await llm.complete(stage=stage, messages=messages, on_delta=on_delta)
        state.budget.add(completion)
        await self.deps.store.record_usage(
            state.conversation_id,
            self.run_id,
            stage,
            completion.model or model or llm.default_model or "",
            completion.prompt_tokens,
            completion.completion_tokens,
            completion.cost,
        )
        return completion
