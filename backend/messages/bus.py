"""Notification bus: 'something new was stored for this run'. Readers read from the store."""

from __future__ import annotations

import asyncio
from collections import defaultdict


class Bus:
    """In-process notify/wait keyed by run id. Never carries data, only a wake-up."""

    def __init__(self) -> None:
        self._waiters: dict[str, set[asyncio.Event]] = defaultdict(set)

    def notify(self, key: str) -> None:
        for event in self._waiters.get(key, ()):
            event.set()

    async def wait(self, key: str, event: asyncio.Event, seconds: float) -> bool:
        """Wait until notified (True) or the timeout passes (False)."""
        try:
            await asyncio.wait_for(event.wait(), seconds)
            return True
        except TimeoutError:
            return False
        finally:
            event.clear()

    def subscribe(self, key: str) -> asyncio.Event:
        event = asyncio.Event()
        self._waiters[key].add(event)
        return event

    def unsubscribe(self, key: str, event: asyncio.Event) -> None:
        waiters = self._waiters.get(key)
        if waiters is not None:
            waiters.discard(event)
            if not waiters:
                del self._waiters[key]
