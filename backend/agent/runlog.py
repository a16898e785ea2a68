"""One log line when a run starts and one when it ends."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from backend.agent.context import RunContext

log = logging.getLogger("planact.runs")


async def logged_run(ctx: RunContext, body: Awaitable[str]) -> str:
    """Await the run's ``body``, logging its start and its end (status, model calls,
    tokens, seconds)."""
    started = time.monotonic()
    log.info(
        "run %s started: conversation %s, mode %s, runtime %s, model %s",
        ctx.run_id,
        ctx.conversation_id,
        ctx.mode,
        ctx.runtime.name,
        ctx.model or ctx.llm.default_model or "(none)",
    )
    status = "failed"
    try:
        status = await body
        return status
    finally:
        calls = tokens = 0
        try:
            total = (await ctx.store.run_usage(ctx.run_id))["total"]
            calls, tokens = int(total["calls"]), int(total["total_tokens"])
        except asyncio.CancelledError:
            # a stop that lands once the run has ended changes nothing: its status stands
            task = asyncio.current_task()
            while task is not None and task.uncancel() > 0:
                pass
        except Exception:  # the store going away must not hide the end line
            log.debug("usage of run %s not available", ctx.run_id, exc_info=True)
        log.info(
            "run %s ended: conversation %s, status %s, %d model calls, %d tokens, %.1f s",
            ctx.run_id,
            ctx.conversation_id,
            status,
            calls,
            tokens,
            time.monotonic() - started,
        )
