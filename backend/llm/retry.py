"""The retry policy both clients share.

- LLMConfigError and other LLMError: raised at once (retrying will not help).
- LLMTransientError (429, 408/409, 5xx, network, truncated stream, error mid-stream): retried
  up to ``max_retries`` times with exponential backoff and jitter.
- LLMTimeoutError (no content for LLM_TIMEOUT): retried at most ``max_timeout_retries``
  times (default 1), so a silent model fails after 2 x LLM_TIMEOUT plus one backoff at the
  default settings (about 241 s) instead of 4 x LLM_TIMEOUT.
- LLMDeadlineError (one attempt past LLM_CALL_MAX_SECONDS): not retried.

Live deltas (``FirstLive``) come from the first attempt that sends any: a retry would start
the text over inside the same live message, so it stays quiet and the stored message brings
its whole reply.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from backend.llm.base import (
    DeltaCallback,
    LLMDeadlineError,
    LLMError,
    LLMTimeoutError,
    LLMTransientError,
)

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 3
    max_timeout_retries: int = 1
    base_delay: float = 1.0
    max_delay: float = 60.0

    async def run(self, stage: str, attempt: Callable[[], Awaitable[T]]) -> T:
        attempts = 0
        timeouts = 0
        while True:
            attempts += 1
            try:
                return await attempt()
            except LLMDeadlineError as exc:
                raise LLMError(f"The model call ({stage}) failed: {exc}") from exc
            except LLMTransientError as exc:
                if isinstance(exc, LLMTimeoutError):
                    timeouts += 1
                    give_up = timeouts > self.max_timeout_retries
                else:
                    give_up = False
                if give_up or attempts > self.max_retries:
                    raise type(exc)(
                        f"The model call ({stage}) failed after {attempts} attempts: {exc}"
                    ) from exc
                delay = self.base_delay * (2 ** (attempts - 1)) * (0.5 + random.random())
                wait = getattr(exc, "retry_after", None)
                if isinstance(wait, int | float) and wait > delay:
                    delay = wait
                delay = min(delay, self.max_delay)
                log.warning("model call %s failed (%s); retry in %.2fs", stage, exc, delay)
                await asyncio.sleep(delay)


class FirstLive:
    """Hands each attempt its delta callback: the caller's, until an attempt has sent a
    delta; then None (the attempts after it are retries of a reply already half shown)."""

    def __init__(self, on_delta: DeltaCallback | None) -> None:
        self.on_delta = on_delta
        self.sent = False

    def for_attempt(self) -> DeltaCallback | None:
        if self.on_delta is None or self.sent:
            return None
        on_delta = self.on_delta

        def forward(kind: str, text: str) -> None:
            self.sent = True
            on_delta(kind, text)

        return forward


def short(exc: BaseException | str, limit: int = 300) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[:limit] + "…"


__all__ = ["FirstLive", "LLMError", "RetryPolicy", "short"]
