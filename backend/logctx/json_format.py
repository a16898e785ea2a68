"""One JSON object a line: time, level, logger, message, the log context, ``trace_id`` of
the current OpenTelemetry span when one is recording (if OpenTelemetry is installed), the
exception; uvicorn's access lines also as fields (client, method, path, status)."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

from backend.logctx.context import current

_otel_trace: Any
try:  # tracing is optional (and set up elsewhere): its span, when there is one
    from opentelemetry import trace as _otel_trace
except ImportError:  # depends on what is installed
    _otel_trace = None


def trace_id() -> str | None:
    """The trace id of the current span, if OpenTelemetry is there and a span records."""
    if _otel_trace is None:
        return None
    span = _otel_trace.get_current_span()
    context = span.get_span_context()
    if not span.is_recording() or not context.is_valid:
        return None
    return f"{context.trace_id:032x}"


ACCESS_FIELDS = ("client", "method", "path", "http_version", "status")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        out.update(current())
        if (found := trace_id()) is not None:
            out["trace_id"] = found
        args = record.args
        if record.name == "uvicorn.access" and isinstance(args, tuple) and len(args) == 5:
            out.update(zip(ACCESS_FIELDS, args, strict=True))
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        elif record.exc_text:
            out["exc"] = record.exc_text
        return json.dumps(out, ensure_ascii=False, default=str)
