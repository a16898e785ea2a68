"""ScriptedLLM: replays replies, records calls, fails on an unexpected extra call."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from backend.llm.base import Completion, DeltaCallback, LLMError

Reply = str | Completion | BaseException | Callable[[list[dict[str, Any]]], "str | Completion"]


@dataclass
class Call:
    stage: str
    model: str | None
    messages: list[dict[str, Any]]


class UnexpectedCallError(AssertionError):
    pass


@dataclass
class ScriptedLLM:
    """Replies are ``(stage, reply)`` pairs consumed in order.

    A call whose stage differs from the next scripted stage, or a call after the script
    ran out, raises :class:`UnexpectedCallError` (an AssertionError, so tests fail loudly
    even if the pipeline turns it into an ``error`` message: check ``llm.errors``).
    """

    script: Sequence[tuple[str, Reply]]
    model: str = "scripted/model"
    calls: list[Call] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    # on_delta receives each scripted reply in this many pieces
    delta_pieces: int = 3

    @property
    def default_model(self) -> str | None:
        return self.model

    def stages(self) -> list[str]:
        return [c.stage for c in self.calls]

    async def complete(
        self,
        *,
        stage: str,
        messages: list[dict[str, Any]],
        model: str | None = None,
        on_delta: DeltaCallback | None = None,
    ) -> Completion:
        index = len(self.calls)
        self.calls.append(Call(stage, model, [dict(m) for m in messages]))
        if index >= len(self.script):
            err = f"unexpected extra model call #{index + 1} for stage {stage!r}"
            self.errors.append(err)
            raise UnexpectedCallError(err)
        want, reply = self.script[index]
        if want != stage:
            err = f"model call #{index + 1}: expected stage {want!r}, got {stage!r}"
            self.errors.append(err)
            raise UnexpectedCallError(err)
        if isinstance(reply, BaseException):
            raise reply
        if callable(reply):
            reply = reply(messages)
        if not isinstance(reply, Completion):
            reply = Completion(
                text=reply,
                model=model or self.model,
                finish_reason="stop",
                prompt_tokens=10,
                completion_tokens=5,
            )
        if on_delta is not None:
            # as a streaming model would: reasoning first, then the text, a few pieces each
            for kind, whole in (("reasoning", reply.reasoning), ("text", reply.text)):
                for piece in split_deltas(whole, self.delta_pieces):
                    on_delta(kind, piece)
        return reply


def split_deltas(text: str, pieces: int) -> list[str]:
    """``text`` cut into at most ``pieces`` non-empty parts that concatenate back to it."""
    if not text:
        return []
    size = max(1, -(-len(text) // max(1, pieces)))
    return [text[i : i + size] for i in range(0, len(text), size)]


__all__ = ["Call", "LLMError", "ScriptedLLM", "UnexpectedCallError", "split_deltas"]
