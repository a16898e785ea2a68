"""``GET /metrics``: a process's metrics in the Prometheus text format (0.0.4, which every
Prometheus reads). Protected: with METRICS_TOKEN set, that bearer token; without it,
loopback clients only (asking for a loopback Host too, so that a web page cannot read it
through DNS rebinding). A server answers it on its own port
(``route``); a worker on METRICS_PORT (``start_listener``), a small threaded HTTP server."""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
import threading
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import TYPE_CHECKING, Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import anyio
from prometheus_client import CONTENT_TYPE_PLAIN_0_0_4, CollectorRegistry, generate_latest
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from backend.observe.metrics import REGISTRY
from backend.observe.store_collector import StoreCollector

if TYPE_CHECKING:
    from sqlalchemy import Engine

log = logging.getLogger(__name__)

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1", "[::1]")


class Exposition:
    """What /metrics answers: this process's families and the store's."""

    def __init__(self, engine: Engine, token: str | None, queue: str) -> None:
        self.token = token or None
        self.store_registry = CollectorRegistry(auto_describe=False)
        self.store_registry.register(StoreCollector(engine, queue))

    def render(self) -> bytes:
        """Blocking (the store is read): call it off the event loop."""
        return generate_latest(REGISTRY) + generate_latest(self.store_registry)

    def refusal(
        self, client: str | None, host: str | None, authorization: str | None
    ) -> tuple[int, str] | None:
        """Why this request may not read the metrics (status, message), or None."""
        if self.token is not None:
            scheme, _, given = (authorization or "").partition(" ")
            if scheme.lower() == "bearer" and hmac.compare_digest(
                given.strip().encode(), self.token.encode()
            ):
                return None
            return 401, "The metrics need METRICS_TOKEN as a bearer token."
        if not _loopback_ip(client) or not _loopback_host(host):
            return 403, "The metrics are answered to loopback clients only; set METRICS_TOKEN."
        return None


def _loopback_ip(client: str | None) -> bool:
    try:
        return client is not None and ipaddress.ip_address(client).is_loopback
    except ValueError:
        return False


def _loopback_host(host: str | None) -> bool:
    if host is None:
        return True  # HTTP/1.0 without a Host: not a browser
    name = host.strip().lower()
    if name.startswith("["):
        name = name[: name.find("]") + 1]
    else:
        name = name.rsplit(":", 1)[0] if name.count(":") == 1 else name
    return name in LOOPBACK_NAMES


def _error(status: int, message: str) -> dict[str, Any]:
    code = "unauthorized" if status == 401 else "forbidden"
    return {"error": {"code": code, "message": message}}


def route(exposition: Exposition) -> Route:
    async def metrics(request: Request) -> Response:
        refused = exposition.refusal(
            request.client.host if request.client else None,
            request.headers.get("host"),
            request.headers.get("authorization"),
        )
        if refused is not None:
            status, message = refused
            headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
            return JSONResponse(_error(status, message), status_code=status, headers=headers)
        body = await anyio.to_thread.run_sync(exposition.render)
        return Response(body, media_type=CONTENT_TYPE_PLAIN_0_0_4)

    return Route("/metrics", metrics, methods=["GET"])


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True
    allow_reuse_address = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        return None  # a scrape every few seconds is no news


def wsgi_app(exposition: Exposition) -> Callable[..., Iterable[bytes]]:
    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("PATH_INFO") != "/metrics" or environ.get("REQUEST_METHOD") != "GET":
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b"Only GET /metrics is served here.\n"]
        refused = exposition.refusal(
            environ.get("REMOTE_ADDR"), environ.get("HTTP_HOST"), environ.get("HTTP_AUTHORIZATION")
        )
        if refused is not None:
            status, message = refused
            reason = "401 Unauthorized" if status == 401 else "403 Forbidden"
            start_response(reason, [("Content-Type", "application/json")])
            return [json.dumps(_error(status, message)).encode()]
        body = exposition.render()
        start_response("200 OK", [("Content-Type", CONTENT_TYPE_PLAIN_0_0_4)])
        return [body]

    return app


class Listener:
    """A worker's /metrics on its own port, in a thread; ``close`` stops it."""

    def __init__(self, exposition: Exposition, host: str, port: int) -> None:
        self.server = make_server(
            host, port, wsgi_app(exposition), server_class=_Server, handler_class=_QuietHandler
        )
        self.port = int(self.server.server_address[1])
        self.thread = threading.Thread(
            target=self.server.serve_forever, name="planact-metrics", daemon=True
        )
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def start_listener(exposition: Exposition, host: str, port: int) -> Listener | None:
    """The listener on ``host``:``port``; None (with a warning: the worker still works)
    when the address is taken."""
    try:
        listener = Listener(exposition, host, port)
    except OSError as exc:
        log.warning("metrics: could not listen on %s:%d (%s); no /metrics here", host, port, exc)
        return None
    log.info("metrics on http://%s:%d/metrics", host, listener.port)
    return listener
