"""One trace per run. The run's first execution starts the trace's root span and its
context is stored with the run ("<trace id>-<span id>", hex); an execution that goes on
from a checkpoint (another process took the run over, an answer resumed it) starts its
span as a child of that stored context, so the whole run is one trace across processes.

Under the run span: a span per pipeline stage (the checkpoint's stage as messages are
published), under it a span per task (from the task's messages), and the model calls and
actions under the task (or the stage) that is current when they start."""

from __future__ import annotations

import contextvars
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    Span,
    SpanContext,
    Status,
    StatusCode,
    TraceFlags,
    Tracer,
)

from backend.observe.tracing import capture_content

_CURRENT: contextvars.ContextVar[RunTrace | None] = contextvars.ContextVar(
    "planact_run_trace", default=None
)


def parse_stored(value: str | None) -> SpanContext | None:
    """The span context stored with a run; None when absent or malformed."""
    if not value:
        return None
    trace_hex, _, span_hex = value.partition("-")
    try:
        trace_id, span_id = int(trace_hex, 16), int(span_hex, 16)
    except ValueError:
        return None
    if not trace_id or not span_id or len(trace_hex) != 32 or len(span_hex) != 16:
        return None
    return SpanContext(
        trace_id, span_id, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED)
    )


def stored_form(context: SpanContext) -> str:
    return f"{context.trace_id:032x}-{context.span_id:016x}"


class RunTrace:
    def __init__(self, tracer: Tracer, run_id: str, stored: str | None) -> None:
        self.tracer = tracer
        self.run_id = run_id
        parent = parse_stored(stored)
        attributes: dict[str, Any] = {"planact.run_id": run_id}
        # a run started by an HTTP request: its trace is the run's own, linked to it
        here = trace.get_current_span().get_span_context()
        links = [Link(here)] if here.is_valid else None
        if parent is None:
            self.span = tracer.start_span("run", Context(), attributes=attributes, links=links)
            self.stored: str | None = stored_form(self.span.get_span_context())
        else:
            attributes["planact.resumed"] = True
            context = trace.set_span_in_context(NonRecordingSpan(parent), Context())
            self.span = tracer.start_span("run resumed", context, attributes=attributes)
            self.stored = None  # already stored
        self.stage_name: str | None = None
        self.stage_span: Span | None = None
        self.task_span: Span | None = None

    @property
    def trace_id(self) -> str:
        return format(self.span.get_span_context().trace_id, "032x")

    def parent(self) -> Context:
        """The context a model call or an action starts its span in."""
        span = self.task_span or self.stage_span or self.span
        return trace.set_span_in_context(span, Context())

    def stage(self, name: str) -> None:
        """The run's stage is ``name`` (a checkpoint stage): a new stage span when it changed."""
        if name == self.stage_name:
            return
        self._end_task("")
        if self.stage_span is not None:
            self.stage_span.end()
        self.stage_name = name
        context = trace.set_span_in_context(self.span, Context())
        self.stage_span = self.tracer.start_span(
            f"stage {name}", context, attributes={"planact.stage": name}
        )

    def task(self, task_id: str, status: str, title: str = "") -> None:
        """A task's message: "running" starts its span, "success" / "failure" ends it."""
        if status == "running":
            self._end_task("")
            span = self.stage_span or self.span
            attributes: dict[str, Any] = {"planact.task.id": task_id}
            if capture_content() and title:
                attributes["planact.task.title"] = title
            self.task_span = self.tracer.start_span(
                "task", trace.set_span_in_context(span, Context()), attributes=attributes
            )
        else:
            self._end_task(status)

    def _end_task(self, status: str) -> None:
        span, self.task_span = self.task_span, None
        if span is None:
            return
        if status:
            span.set_attribute("planact.task.status", status)
        if status == "failure":
            span.set_status(Status(StatusCode.ERROR))
        span.end()

    def end(self, status: str) -> None:
        """The run left this process: ``status`` its outcome here (completed, failed,
        stopped, or handed_over / parked: it goes on elsewhere or later)."""
        self._end_task("")
        if self.stage_span is not None:
            self.stage_span.end()
            self.stage_span = None
        self.span.set_attribute("planact.run.status", status)
        if status == "failed":
            self.span.set_status(Status(StatusCode.ERROR))
        self.span.end()


def current_run_trace() -> RunTrace | None:
    return _CURRENT.get()


def enter(run_trace: RunTrace) -> contextvars.Token[RunTrace | None]:
    return _CURRENT.set(run_trace)


def leave(token: contextvars.Token[RunTrace | None]) -> None:
    _CURRENT.reset(token)


def span_parent() -> Context | None:
    """Where a model call's or an action's span goes: under the run's current task or
    stage when inside a run, else under the current span (None)."""
    run_trace = _CURRENT.get()
    return run_trace.parent() if run_trace is not None else None
