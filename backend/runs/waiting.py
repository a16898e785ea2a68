"""Waiting for a run to end, on any process, and storing an end whatever happens."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from backend.messages.bus import Bus
from backend.store.repo import Store

T = TypeVar("T")


async def wait_ended(
    store: Store,
    bus: Bus,
    cross_process: bool,
    run_id: str,
    timeout: float | None = None,  # noqa: ASYNC109
) -> str | None:
    """The run's final status once it ended (woken by the notifier, re-read as a safety
    net), or None on timeout or when it does not exist."""
    sub = bus.subscribe(run_id)
    loop = asyncio.get_running_loop()
    deadline = None if timeout is None else loop.time() + timeout
    poll = 2.0 if cross_process else 0.25
    try:
        while True:
            run = await store.get_run(run_id)
            if run is None:
                return None
            if run.status not in ("running", "waiting"):  # waiting: not ended
                return run.status
            left = poll if deadline is None else min(poll, deadline - loop.time())
            if left <= 0:
                return None
            await bus.wait(run_id, sub, left)
    finally:
        bus.unsubscribe(run_id, sub)


async def uncancellable(work: Coroutine[Any, Any, T]) -> T:
    """Finish ``work`` even if the caller is cancelled meanwhile; re-raise the cancellation
    afterwards (the end of a run must be stored whatever happens)."""
    fut = asyncio.ensure_future(work)
    cancelled = False
    while True:
        try:
            result = await asyncio.shield(fut)
            break
        except asyncio.CancelledError:
            cancelled = True
            if fut.done() and fut.cancelled():
                raise
    if cancelled:
        raise asyncio.CancelledError()
    return result
