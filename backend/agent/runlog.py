"""One log line when a run starts and one when it ends; a run that waits for a person, or
that this process hands over at shutdown, has not ended: its line says what happens."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable
from typing import TYPE_CHECKING

from backend.agent.outcomes import Outcome
from backend.waits.classes import APPROVAL, ASK_USER

if TYPE_CHECKING:
    from backend.agent.context import RunContext

log = logging.getLogger("planact.runs")
REASON_CHARS = 300  # of a failed run's error in its end line
# what `run_pipeline` returns that is not a run status (backend/agent/outcomes.py)
HANDED_OVER = Outcome.HANDED_OVER
PARKED = Outcome.PARKED
# what a run waits for, in people's words, by the kind of wait
_WAITS_FOR = {APPROVAL: "approval", ASK_USER: "an answer to its question"}


async def logged_run(ctx: RunContext, body: Awaitable[str]) -> str:
    """Await the run's ``body``, logging its start and its end (status, model calls,
    tokens, seconds, and why a run that did not complete ended)."""
    started = time.monotonic()
    answered = ctx.resumed and ctx.state.wait is not None  # it waited: the answer came
    log.info(
        "run %s %s: conversation %s, mode %s, runtime %s, model %s",
        ctx.run_id,
        "goes on after a person's answer" if answered else "resumed" if ctx.resumed else "started",
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
        seconds = time.monotonic() - started
        cid = ctx.state.conversation_id
        if status == PARKED:
            wait = ctx.state.wait
            log.info(
                "run %s waits for a person (%s): conversation %s, %d model calls, %d tokens, "
                "%.1f s so far",
                ctx.run_id,
                _WAITS_FOR.get(wait.kind if wait else "", "an answer"),
                cid,
                calls,
                tokens,
                seconds,
            )
        elif status == HANDED_OVER:
            log.info(
                "run %s leaves this process as it shuts down (another one goes on with it): "
                "conversation %s, %d model calls, %d tokens, %.1f s so far",
                ctx.run_id,
                cid,
                calls,
                tokens,
                seconds,
            )
        else:
            log.info(
                "run %s ended: conversation %s, status %s, %d model calls, %d tokens, %.1f s%s",
                ctx.run_id,
                cid,
                status,
                calls,
                tokens,
                seconds,
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
