"""A span per HTTP request (pure ASGI), when traces are on: the HTTP semantic conventions'
method, path and status; an incoming W3C ``traceparent`` is its parent. The query string is
left out (an EventSource link carries its access token there)."""

from __future__ import annotations

from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from backend.observe.tracing import tracer


class TracingMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        live = tracer()
        if scope["type"] != "http" or live is None:
            await self.app(scope, receive, send)
            return
        carrier = {
            k.decode("latin-1"): v.decode("latin-1")
            for k, v in scope.get("headers", ())
            if k in (b"traceparent", b"tracestate")
        }
        method = str(scope.get("method", "GET"))
        span = live.start_span(
            method,
            propagate.extract(carrier),
            kind=SpanKind.SERVER,
            attributes={
                "http.request.method": method,
                "url.path": str(scope.get("path", "")),
                "url.scheme": str(scope.get("scheme", "http")),
            },
        )
        status = 0

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                span.set_attribute("http.response.status_code", status)
            await send(message)

        with trace.use_span(span, end_on_exit=True, record_exception=True):
            try:
                await self.app(scope, receive, sending)
            finally:
                if status >= 500:
                    span.set_status(Status(StatusCode.ERROR))
