"""Per-attempt deadlines: an idle timer that only content resets, under a hard cap.

    async with Deadline(idle=120, hard=600) as deadline:
        ...            # the request and the whole stream
        deadline.touch()   # on every piece of content (text, reasoning, tool call, finish)

No content for ``idle`` seconds raises :class:`LLMTimeoutError`; the attempt running past
``hard`` seconds raises :class:`LLMDeadlineError`. One ``asyncio.timeout`` does the
cancelling; a watchdog callback (one timer, re-armed at most once per ``idle`` period)
decides when it fires, so ``touch()`` on the hot path is one float store.
"""

from __future__ import annotations

import asyncio
from types import TracebackType

from backend.llm.base import LLMDeadlineError, LLMTimeoutError


class Deadline:
    __slots__ = ("_cm", "_handle", "_loop", "hard", "idle", "idle_fired", "last")

    def __init__(self, *, idle: float, hard: float) -> None:
        self.idle = idle
        self.hard = hard
        self.idle_fired = False
        self.last = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._cm: asyncio.Timeout | None = None
        self._handle: asyncio.TimerHandle | None = None

    def touch(self) -> None:
        """Content arrived: the idle period starts over."""
        self.last = self._loop.time()  # type: ignore[union-attr]

    def _check(self) -> None:
        loop = self._loop
        assert loop is not None and self._cm is not None
        due = self.last + self.idle
        now = loop.time()
        if now >= due:
            self.idle_fired = True
            self._cm.reschedule(now)  # asyncio.timeout cancels the attempt now
        else:
            self._handle = loop.call_at(due, self._check)

    async def __aenter__(self) -> Deadline:
        loop = self._loop = asyncio.get_running_loop()
        self.last = now = loop.time()
        self._cm = asyncio.timeout_at(now + self.hard)
        await self._cm.__aenter__()
        self._handle = loop.call_at(now + self.idle, self._check)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._handle is not None:
            self._handle.cancel()
        assert self._cm is not None
        try:
            await self._cm.__aexit__(exc_type, exc, tb)
        except TimeoutError as err:
            if self.idle_fired:
                raise LLMTimeoutError(
                    f"the model sent no content for {self.idle:g} s (LLM_TIMEOUT): check that "
                    "the model server is up and not overloaded, or raise LLM_TIMEOUT"
                ) from err
            raise LLMDeadlineError(
                f"the reply was cut off after {self.hard:g} s (LLM_CALL_MAX_SECONDS): raise it "
                "for very long replies"
            ) from err
