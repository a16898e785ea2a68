"""One log line when a run starts and one when it ends."""

from __future__ import annotations

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
        ctx.state.conversation_id,
        ctx.state.mode,
        ctx.deps.runtime.name,
        ctx.state.model or ctx.deps.llm.default_model or "(none)",
    )
    status = "failed"
    try:
        status = await body
        return status
    finally:
        # what the run spent is on its budget: no await here, where a stop arriving just
        # after the body returned would turn a finished run into a failed one
        calls, tokens = ctx.state.budget.calls, ctx.state.budget.tokens
        log.info(
            "run %s ended: conversation %s, status %s, %d model calls, %d tokens, %.1f s",
            ctx.run_id,
            ctx.state.conversation_id,
            status,
            calls,
            tokens,
            time.monotonic() - started,
        )
