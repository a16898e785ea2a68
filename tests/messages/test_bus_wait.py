"""A reader's wait on the bus (backend/messages/bus.py): woken by a notification, or after
its time limit; the limit is kept by one lazy timer per subscription, not one timer armed
and cancelled per wait."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from backend.messages.bus import Bus


async def test_a_wait_ends_when_notified_or_when_its_time_passes() -> None:
    bus = Bus()
    sub = bus.subscribe("r")
    asyncio.get_running_loop().call_soon(bus.notify, "r")
    assert await bus.wait("r", sub, 30) is True
    assert not sub.is_set()  # cleared for the next wait
    assert await bus.wait("r", sub, 0.01) is False  # nothing came: the limit ends it
    assert await bus.wait("r", sub, 0.01) is False  # and the next one too
    bus.unsubscribe("r", sub)


async def test_a_shorter_limit_after_a_longer_one_is_kept() -> None:
    bus = Bus()
    sub = bus.subscribe("r")
    asyncio.get_running_loop().call_soon(bus.notify, "r")
    assert await bus.wait("r", sub, 30) is True  # leaves a timer armed 30 s ahead
    async with asyncio.timeout(10):  # the 0.01 s limit holds, not the 30 s timer
        assert await bus.wait("r", sub, 0.01) is False
    bus.unsubscribe("r", sub)


async def test_many_notified_waits_arm_one_timer(monkeypatch: pytest.MonkeyPatch) -> None:
    loop = asyncio.get_running_loop()
    armed: list[float] = []
    call_at = loop.call_at

    def counting_call_at(when: float, *args: Any, **kwargs: Any) -> asyncio.TimerHandle:
        armed.append(when)
        return call_at(when, *args, **kwargs)

    bus = Bus()
    sub = bus.subscribe("r")
    with monkeypatch.context() as patched:
        patched.setattr(loop, "call_at", counting_call_at)
        for _ in range(200):  # a reader woken by each delta, as a live stream's is
            loop.call_soon(bus.notify, "r")
            assert await bus.wait("r", sub, 5) is True
    bus.unsubscribe("r", sub)
    assert len(armed) == 1  # before: one per wait (asyncio.timeout)
