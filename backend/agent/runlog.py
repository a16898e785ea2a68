"""One log line when a run starts and one when it ends."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from backend.agent.context import RunContext

log = logging.getLogger("planact.runs")
REASON_CHARS = 300  # of a failed run's error in its end line


async def logged_run(ctx: RunContext, body: Awaitable[str]) -> str:
    """Await the run's ``body``, logging its start and its end (status, model calls,
    tokens, seconds, and why a run that did not complete ended)."""
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
            "run %s ended: conversation %s, status %s, %d model calls, %d tokens, %.1f s%s",
            ctx.run_id,
            ctx.state.conversation_id,
            status,
            calls,
            tokens,
            time.monotonic() - started,
            _why(status, ctx.state.reason),
        )


def _why(status: str, reason: str) -> str:
    """``; reason: …`` for a run that did not complete: its error on one line, cut."""
    if status not in ("failed", "stopped"):
        return ""
    line = " ".join(reason.split()) or ("stopped on request" if status == "stopped" else "")
    if not line:
        return ""
    if len(line) > REASON_CHARS:
        line = line[:REASON_CHARS] + "…"
    return f"; reason: {line}"
