"""A run's execution in this process, observed: counted as a resume when it goes on from a
checkpoint, and, with traces on, under the run's one trace (its context stored with the run
by the first execution, so that a resumed execution on any process continues it)."""

from __future__ import annotations

import logging
from collections.abc import Coroutine
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace

from backend.agent.context import RunContext
from backend.observe import metrics, runtrace
from backend.observe.tracing import tracer
from backend.store.repo import Store
from backend.store.rows import RunToExecute

log = logging.getLogger(__name__)


async def observed_run(
    store: Store, run: RunToExecute, ctx: RunContext, drive: Coroutine[Any, Any, str]
) -> str:
    """Await ``drive`` (the run to its end here) and return its status."""
    if ctx.resumed:
        metrics.resumed()
    live = tracer()
    if live is None:
        return await drive
    run_trace = runtrace.RunTrace(live, ctx.run_id, run.trace_context)
    if run_trace.stored is not None:
        try:
            await store.set_run_trace(ctx.run_id, run_trace.stored)
        except Exception as exc:  # the run goes on; a resume would start a trace of its own
            log.warning("run %s: could not store its trace context: %s", ctx.run_id, exc)
    ctx.trace = run_trace
    entered = runtrace.enter(run_trace)
    attached = otel_context.attach(trace.set_span_in_context(run_trace.span))
    status = "failed"
    try:
        status = await drive
        return status
    finally:
        run_trace.end(status)
        otel_context.detach(attached)
        runtrace.leave(entered)
