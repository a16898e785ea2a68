"""HTTP server metrics of the API (pure ASGI): OpenTelemetry's ``http.server.request.duration``
in Prometheus' naming, by route template (never the path itself: ids would be unbounded),
method and status. A stream's request lasts as long as the stream."""

from __future__ import annotations

import time
from collections.abc import Sequence

from prometheus_client import Histogram
from starlette.routing import BaseRoute, Match, Mount, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from backend.observe.metrics import REGISTRY

# OpenTelemetry's advice for http.server.request.duration
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10)
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})

DURATION = Histogram(
    "planact_http_server_request_duration_seconds",
    "Seconds the API took to answer a request (a stream: until it ended), by route template, "
    "method and status.",
    ["http_route", "http_request_method", "http_response_status_code"],
    buckets=BUCKETS,
    registry=REGISTRY,
)


def route_template(routes: Sequence[BaseRoute], scope: Scope) -> str:
    """The template of the route a request matched (``/api/conversations/{cid}``), a mount's
    path with ``/{path}`` after it, or ``other``."""
    for route in routes:
        match, _ = route.matches(scope)
        if match is not Match.FULL:
            continue
        if isinstance(route, Route):
            return route.path
        if isinstance(route, Mount):
            return f"{route.path}/{{path}}" if route.path else "/{path}"
    return "other"


class HttpMetricsMiddleware:
    def __init__(self, app: ASGIApp, routes: Sequence[BaseRoute]) -> None:
        self.app = app
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # an exception before any answer

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            method = str(scope.get("method", "GET"))
            DURATION.labels(
                route_template(self.routes, scope),
                method if method in METHODS else "_OTHER",
                str(status),
            ).observe(time.perf_counter() - started)
