"""Small asyncio helpers for clean-up that must finish whatever happens to its caller."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import Any


async def shielded(work: Awaitable[Any]) -> None:
    """Run clean-up to its end even if the caller is cancelled (again) meanwhile."""
    task = asyncio.ensure_future(work)
    try:
        await asyncio.shield(task)
    except BaseException:
        task.add_done_callback(retrieve)
        raise


async def settle(done: asyncio.Future[Any], within: float) -> None:
    """Wait up to ``within`` seconds for a future, whatever it ends with."""
    with contextlib.suppress(Exception):
        async with asyncio.timeout(within):
            await asyncio.shield(done)


def retrieve(future: asyncio.Future[Any]) -> None:
    """Mark a future's exception as seen (nobody may wait for it any more)."""
    if not future.cancelled():
        future.exception()
