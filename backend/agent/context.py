"""RunContext: what every stage of one run needs, and the two things stages do: publish
messages and call the model."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from backend.llm.base import LLM, Completion, LLMError
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
    # issue 13: the model the person picked for this run (None: LLM_MODEL / specialists)
    model: str | None = None
    # issue 13: workspace files the person uploaded (told to the planner and thinking)
    inputs: list[str] = field(default_factory=list)

    async def publish(self, msg: Message) -> Message:
        """Store first, then notify: every reader reads from the store."""
        msg.conversation_id = self.conversation_id
        msg.run_id = self.run_id
        if msg.role == "assistant":  # issue 13: never show the server's workspace path
            msg.content = relative_paths(msg.content, self.workspace)
            msg.meta.content = relative_paths(msg.meta.content, self.workspace)
        stored = await self.store.append_message(msg)
        self.bus.publish(self.run_id, stored)
        if self.listener is not None:
            result = self.listener(stored)
            if result is not None:
                await result
        return stored

    async def call_model(
        self, stage: str, messages: list[dict[str, Any]], *, specialist: bool = False
    ) -> Completion:
        """Call the model for ``stage``; the specialist's model when asked, falling back to
        the default model if it errors. Usage is recorded per stage."""
        model = self.specialist.model if (specialist and self.specialist) else None
        if self.model:  # a model the person picked wins, with no silent fallback
            model = self.model
        try:
            completion = await self.llm.complete(stage=stage, messages=messages, model=model)
        except LLMError as exc:  # also a misconfigured specialist model
            if not model or model == self.llm.default_model or model == self.model:
                raise
            log.warning("specialist model %s failed (%s); using the default", model, exc)
            completion = await self.llm.complete(stage=stage, messages=messages)
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
