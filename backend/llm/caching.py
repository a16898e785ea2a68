"""What a model call tells a provider's prompt cache (docs/api.md "What a run costs").

- Breakpoints, for providers that take explicit ones (Anthropic's ``cache_control``, and the
  models litellm marks as taking it: ``supports_anthropic_cache_control``): the end of the
  stable prefix (the last of the leading system messages: the run's fixed part) and the end
  of the latest message, so each call reads what the previous one wrote. Two of the four a
  request may carry. litellm places them (``cache_control_injection_points``).
- A cache key, where the provider takes one: OpenAI's ``prompt_cache_key`` (requests with
  the same key go to the same cache), the run's conversation. Sent to OpenAI's own API
  only: an OpenAI-compatible server may refuse a field it does not know.

The key is the conversation of the call being made: :func:`keyed` sets it around a call.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any
from urllib.parse import urlsplit

MAX_BREAKPOINTS = 4  # what Anthropic accepts in one request
OPENAI_HOSTS = frozenset({"api.openai.com"})

_KEY: ContextVar[str | None] = ContextVar("planact_prompt_cache_key", default=None)


@contextmanager
def keyed(conversation_id: str | None) -> Iterator[None]:
    """Calls made inside carry ``conversation_id`` as their cache key."""
    token = _KEY.set(conversation_id or None)
    try:
        yield
    finally:
        _KEY.reset(token)


def cache_key() -> str | None:
    return _KEY.get()


def takes_cache_key(url: str) -> bool:
    """Whether the chat-completions endpoint ``url`` takes ``prompt_cache_key``."""
    return (urlsplit(url).hostname or "") in OPENAI_HOSTS


def breakpoints(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """litellm's injection points: the end of the leading system messages, the end of the
    latest message (one when they are the same message)."""
    if not messages:
        return []
    points: list[dict[str, Any]] = []
    stable = 0
    while stable < len(messages) and messages[stable].get("role") == "system":
        stable += 1
    if 0 < stable < len(messages):
        points.append({"location": "message", "index": stable - 1})
    points.append({"location": "message", "index": len(messages) - 1})
    return points[:MAX_BREAKPOINTS]


_TAKES: dict[str, bool] = {}


def takes_cache_control(model: str) -> bool:
    """Whether litellm sends ``model``'s requests with ``cache_control`` breakpoints
    (Anthropic's Claude models, on Anthropic, Bedrock, Vertex AI, Azure AI). litellm must be
    imported already (the litellm client's calls)."""
    if model not in _TAKES:
        from litellm.llms.anthropic.common_utils import supports_anthropic_cache_control

        try:
            _TAKES[model] = bool(supports_anthropic_cache_control(model, None))
        except Exception:  # an unroutable model takes none
            _TAKES[model] = False
    return _TAKES[model]
