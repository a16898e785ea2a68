"""The LLM seam. The pipeline talks to this protocol, never to litellm or httpx."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

STAGES = ("route", "auto_reply", "planning", "thinking", "summary")

# on_delta(kind, text): kind is "text" or "reasoning", text the piece just received.
# Called synchronously on the event loop as the reply arrives: keep it cheap, never block.
DeltaCallback = Callable[[str, str], None]


@dataclass
class Completion:
    text: str
    model: str = ""
    finish_reason: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    # every input token, those served from the provider's cache and written to it included
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_input_tokens: int = 0  # input read from the provider's prompt cache
    cache_write_tokens: int = 0  # input written to it (Anthropic's cache_creation_input_tokens)
    cost: float | None = None
    cache_cost: float | None = None  # the part of ``cost`` paid for cached input
    # reasoning the provider (or litellm) split off the text, e.g. from <think> blocks
    reasoning: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


class LLMError(Exception):
    """A model call failed for good. The message is written for the user."""


class LLMConfigError(LLMError):
    """LLM_MODEL / key missing or rejected: retrying will not help."""


class LLMTransientError(LLMError):
    """One attempt failed in a way a retry may fix (429, 5xx, network, truncated stream)."""


class LLMTruncatedError(LLMTransientError):
    """The stream ended without a finish reason and without [DONE]: the reply is partial."""


class LLMTimeoutError(LLMTransientError):
    """No content for LLM_TIMEOUT seconds (keep-alive comments are not content)."""


class LLMDeadlineError(LLMError):
    """One attempt ran past LLM_CALL_MAX_SECONDS. Not retried: it would run as long again."""


class LLM(Protocol):
    async def complete(
        self,
        *,
        stage: str,
        messages: list[dict[str, Any]],
        model: str | None = None,
        on_delta: DeltaCallback | None = None,
    ) -> Completion:
        """One model call for ``stage``. ``model`` overrides the default model.

        ``on_delta("text" | "reasoning", piece)`` is called as the reply arrives (in order;
        the pieces of one kind concatenate to the final ``text`` / ``reasoning`` of a
        successful call). A failed attempt that is retried may have produced deltas first:
        a retry starts the reply over.
        """
        ...

    @property
    def default_model(self) -> str | None: ...
