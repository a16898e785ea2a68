"""What one model call and one action emit: their metrics and, with traces on, their span
(the GenAI semantic conventions for model calls)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from backend.observe import metrics
from backend.observe.labels import STAGES, ModelLabels, bounded
from backend.observe.runtrace import span_parent
from backend.observe.tracing import capture_content, tracer

Delta = Callable[[str, str], None]


def _span(name: str, kind: SpanKind, attributes: dict[str, Any]) -> Span | None:
    """The span of a model call or an action, under the run's, when traces are on."""
    live = tracer()
    if live is None:
        return None
    return live.start_span(name, span_parent(), kind=kind, attributes=attributes)


class ModelCall:
    """Started when the call starts; ``done`` or ``failed`` once, when it ends."""

    def __init__(
        self, labels: ModelLabels, stage: str, model: str, messages: list[dict[str, Any]]
    ) -> None:
        self.started = time.perf_counter()
        self.first: float | None = None
        self.model = labels(model)
        self.stage = bounded(stage, STAGES)
        self.span = _span(
            f"chat {model}",
            SpanKind.CLIENT,
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": model,
                "planact.stage": self.stage,
            },
        )
        if self.span is not None and capture_content():
            self.span.set_attribute("gen_ai.input.messages", _json(messages))

    def deltas(self, on_delta: Delta | None) -> Delta:
        """``on_delta`` (or nothing) with the time of the first piece noted."""

        def first(kind: str, text: str) -> None:
            if self.first is None:
                self.first = time.perf_counter() - self.started
            if on_delta is not None:
                on_delta(kind, text)

        return first

    def done(
        self,
        *,
        model: str,
        input_tokens: int,
        output_tokens: int,
        cost: float | None,
        finish_reason: str | None,
        text: str,
        cached_input_tokens: int = 0,
        cache_write_tokens: int = 0,
        cache_cost: float | None = None,
    ) -> None:
        self._timed("ok")
        if input_tokens:
            metrics.TOKENS.labels(self.model, "input").inc(input_tokens)
        if output_tokens:
            metrics.TOKENS.labels(self.model, "output").inc(output_tokens)
        if cost:
            metrics.COST.labels(self.model).inc(cost)
        if cached_input_tokens:
            metrics.CACHE_TOKENS.labels(self.model, "read").inc(cached_input_tokens)
        if cache_write_tokens:
            metrics.CACHE_TOKENS.labels(self.model, "write").inc(cache_write_tokens)
        if cache_cost:
            metrics.CACHE_COST.labels(self.model).inc(cache_cost)
        span = self.span
        if span is None:
            return
        span.set_attribute("gen_ai.response.model", model)
        span.set_attribute("gen_ai.usage.input_tokens", input_tokens)
        span.set_attribute("gen_ai.usage.output_tokens", output_tokens)
        span.set_attribute("gen_ai.usage.cache_read.input_tokens", cached_input_tokens)
        span.set_attribute("gen_ai.usage.cache_creation.input_tokens", cache_write_tokens)
        span.set_attribute("gen_ai.response.finish_reasons", [finish_reason or "unknown"])
        if cost is not None:
            span.set_attribute("planact.cost_usd", cost)
        if capture_content():
            output = [{"role": "assistant", "parts": [{"type": "text", "content": text}]}]
            span.set_attribute("gen_ai.output.messages", _json(output))
        span.end()

    def failed(self, outcome: str, exc: BaseException) -> None:
        """``outcome``: error, timeout, config_error or cancelled."""
        self._timed(outcome)
        span = self.span
        if span is None:
            return
        span.set_attribute("error.type", type(exc).__name__)
        span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
        span.end()

    def _timed(self, outcome: str) -> None:
        metrics.MODEL_CALLS.labels(self.model, self.stage, outcome).inc()
        metrics.MODEL_SECONDS.labels(self.model, self.stage).observe(
            time.perf_counter() - self.started
        )
        if self.first is not None:
            metrics.FIRST_TOKEN.labels(self.model, self.stage).observe(self.first)


class ActionRun:
    """One action through the registry's dispatch; ``action_type`` a registered type."""

    def __init__(self, action_type: str) -> None:
        self.type = action_type
        self.started = time.perf_counter()
        self.span = _span(
            f"execute_tool {action_type}",
            SpanKind.INTERNAL,
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": action_type,
                "planact.action.type": action_type,
            },
        )

    def ended(self, status: str, exc: BaseException | None = None) -> None:
        """``status``: success, failure (the action's), error (it raised)."""
        metrics.action_done(self.type, status, time.perf_counter() - self.started)
        span = self.span
        if span is None:
            return
        span.set_attribute("planact.action.status", status)
        if exc is not None:
            span.set_attribute("error.type", type(exc).__name__)
        if status != "success":
            span.set_status(Status(StatusCode.ERROR))
        span.end()


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)
