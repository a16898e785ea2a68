"""OpenTelemetry set-up, from the standard variables only (OTEL_EXPORTER_OTLP_ENDPOINT or
OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES,
OTEL_EXPORTER_OTLP_HEADERS, OTEL_BSP_*, OTEL_SDK_DISABLED ...). Without an endpoint nothing
is set up: ``tracer()`` is None and every emitting place skips its work.

Spans carry no prompt and no model output unless the operator turns capture on with
OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true (the GenAI convention)."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

from opentelemetry import trace
from opentelemetry.trace import Tracer

log = logging.getLogger(__name__)

ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
CAPTURE_VARIABLE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
SCOPE = "planact"


class _Tracing:
    tracer: Tracer | None = None
    capture: bool = False
    provider: object | None = None


_state = _Tracing()


def wanted(environ: Mapping[str, str] | None = None) -> bool:
    """The variables ask for traces: an OTLP endpoint, the SDK not disabled, the traces
    exporter not "none"."""
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if env.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return False
    return any(env.get(name, "").strip() for name in ENDPOINT_VARIABLES)


def setup_tracing(service: str = "planact") -> bool:
    """Set the SDK up once per process when the variables ask for it (OTLP over HTTP,
    batched). Returns whether traces are on."""
    if _state.tracer is not None:
        return True
    if not wanted():
        return False
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    attributes = {} if os.environ.get("OTEL_SERVICE_NAME") else {SERVICE_NAME: service}
    provider = TracerProvider(resource=Resource.create(attributes))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    _state.provider = provider
    _state.tracer = provider.get_tracer(SCOPE)
    _state.capture = os.environ.get(CAPTURE_VARIABLE, "").strip().lower() == "true"
    log.info("traces on: OTLP/HTTP to %s", _endpoint())
    return True


def flush_tracing() -> None:
    """Export the spans ended so far (a server's or worker's end; the SDK stays set up)."""
    provider = _state.provider
    if provider is not None:
        provider.force_flush()  # type: ignore[attr-defined]


def shutdown_tracing() -> None:
    """Export what is left (at a process's end)."""
    provider = _state.provider
    if provider is not None:
        provider.shutdown()  # type: ignore[attr-defined]
    _state.tracer, _state.provider = None, None


def tracer() -> Tracer | None:
    """The process's tracer; None when traces are off."""
    return _state.tracer


def capture_content() -> bool:
    """Prompts and outputs may go into spans (the operator asked)."""
    return _state.capture


def current_trace_id() -> str | None:
    """The trace id (32 hex digits) of the current span, for log lines; None outside one."""
    context = trace.get_current_span().get_span_context()
    return format(context.trace_id, "032x") if context.is_valid else None


def _endpoint() -> str:
    return next((os.environ[n] for n in ENDPOINT_VARIABLES if os.environ.get(n)), "")
