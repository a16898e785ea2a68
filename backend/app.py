"""create_app(settings, deps) -> Starlette. No module-level singletons."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

from backend.agent.specialists import Specialist
from backend.api import agent, conversations, files, mcp, retry, uploads, waits
from backend.api import checkpoints as checkpoints_api
from backend.api import docs as docs_api  # the OpenAPI document and its page
from backend.api import previews as previews_api
from backend.api import ready as ready_api
from backend.api import runtimes as runtimes_api
from backend.api import settings as settings_api
from backend.api import shared as shared_api
from backend.api.auth import AuthMiddleware
from backend.api.cross_site import GuardMiddleware
from backend.api.errors import ApiError, api_error_handler, error_response, http_error_handler
from backend.api.headers import BrowserHeadersMiddleware
from backend.api.logcontext import LogContextMiddleware
from backend.api.models import Health
from backend.config import Settings
from backend.lemonai import Services, create_lemonai_app
from backend.llm.base import LLM
from backend.llm.dispatch import DispatchLLM
from backend.llm.factory import make_llm
from backend.observe import endpoint as observe_endpoint
from backend.observe.http import TracingMiddleware
from backend.observe.http_metrics import HttpMetricsMiddleware
from backend.observe.tracing import flush_tracing, setup_tracing
from backend.openapi import Reply, operation, undocumented
from backend.previews.links import check_origin, links_of
from backend.previews.listener import PreviewListener
from backend.runs import RunManager
from backend.runs.executor import QUEUE, QueueExecutor, require_postgres
from backend.runtime.base import Runtime
from backend.runtime.registry import for_settings as runtimes_for
from backend.store.repo import Store
from backend.tools.kit import Tools
from backend.tools.mcp import McpManager

log = logging.getLogger(__name__)


class SPAFiles(StaticFiles):
    """The built Vue app; unknown paths outside /api fall back to index.html."""

    async def get_response(self, path: str, scope: Scope) -> Response:
        try:
            return await super().get_response(path, scope)
        except HTTPException as exc:
            if exc.status_code != 404 or path.startswith("api"):
                raise
            return await super().get_response("index.html", scope)


@operation(
    "Liveness",
    tag="operating",
    public=True,
    replies=(Reply(200, "The process answers.", Health),),
)
async def health(request: Request) -> Response:
    body = _health_body(tuple(request.app.state.runtimes_available))
    return Response(body, media_type="application/json")


@functools.lru_cache(maxsize=16)
def _health_body(runtimes: tuple[str, ...]) -> bytes:
    """The answer for these runtimes, made once: probes come many times a second."""
    return bytes(JSONResponse(Health(status="ok", runtimes=list(runtimes)).model_dump()).body)


@undocumented
async def api_not_found(request: Request) -> Response:
    return error_response(404, f"No route {request.url.path}.")


def create_app(
    settings: Settings,
    *,
    llm: LLM | None = None,
    runtimes: dict[str, Runtime] | None = None,
    specialists: tuple[Specialist, ...] | None = None,
) -> Starlette:
    # -- runs in the store: instance id, notifier, executor (backend/runs) ----------------
    if settings.executor == "queue":
        require_postgres(settings.database_url)  # a clear start-up error (QueueConfigError)
    check_origin(settings, users=len(set(settings.user_tokens().values())))
    store = Store(settings.database_url)
    traced = setup_tracing()  # metrics and traces: only with OTEL_EXPORTER_OTLP_*ENDPOINT
    own_llm: DispatchLLM | None = None  # made here: prewarmed at start, closed at shutdown
    if llm is None:
        llm = own_llm = make_llm(settings)
    mcp_servers = McpManager.from_settings(settings)  # a bad MCP_SERVERS_FILE stops start-up
    manager = RunManager.for_process(
        settings,
        store,
        llm,
        kind="serve",
        specialists=specialists,
        runtimes=runtimes,
        executor=QueueExecutor(settings.database_url) if settings.executor == "queue" else None,
        tools=Tools.from_settings(settings, mcp=mcp_servers),  # the one MCP manager
    )

    preview_listener = PreviewListener(settings, store)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await anyio.to_thread.run_sync(store.migrate)
        await manager.open()  # lease, listener, executor; recovers runs of dead owners
        if manager.lease.recovered:
            log.warning("took over %d interrupted run(s)", manager.lease.recovered)
        checker = asyncio.create_task(_probe_runtimes(app, manager))
        if settings.preview_listen:  # previews: the preview origin's own listener
            await preview_listener.start()
        if own_llm is not None:
            own_llm.prewarm()  # litellm (seconds to import) in the background, if needed
        try:
            yield
        finally:
            # let the probe finish (a ping) so that no half-made engine client leaks
            with contextlib.suppress(Exception):
                await asyncio.wait_for(checker, 10)
            await manager.shutdown()  # after SIGTERM's drain (runs/server.py): stops what is left
            await preview_listener.close()
            await mcp_servers.aclose()
            if own_llm is not None:
                await own_llm.aclose()
            await store.close()
            flush_tracing()  # metrics and traces: the spans of this server's last requests

    routes: list[Route | Mount] = [
        Route("/api/health", health, methods=["GET"]),
        *agent.routes,
        *conversations.routes,
        *files.routes,
        *uploads.routes,
        *settings_api.routes,
        *retry.routes,
        *mcp.routes,
        *waits.routes,
        *docs_api.routes,
        *ready_api.routes,
        *previews_api.routes,
        *checkpoints_api.routes,
        *shared_api.routes,
        Route("/api/{rest:path}", api_not_found, methods=["GET", "POST", "PUT", "DELETE", "PATCH"]),
        # metrics and traces (backend/observe): GET /metrics unless METRICS=0
        *([metrics_route(settings, store)] if settings.metrics else []),
        Mount("/lemonai", app=create_lemonai_app(Services(settings, manager, store))),
    ]
    dist = Path(settings.frontend_dist)
    if (dist / "index.html").is_file():
        routes.append(Mount("/", SPAFiles(directory=dist, html=True), name="ui"))
    else:
        routes.append(Route("/", _no_ui, methods=["GET"]))

    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        exception_handlers={ApiError: api_error_handler, HTTPException: http_error_handler},
    )
    app.add_middleware(LogContextMiddleware)  # log lines name the user, run, conversation
    app.add_middleware(AuthMiddleware, tokens=settings.user_tokens())
    # added last: runs first (a foreign Host or origin is refused before anything else)
    app.add_middleware(
        GuardMiddleware,
        allowed_hosts=settings.allowed_hosts,
        allowed_origins=settings.allowed_origins,
        bound_host=settings.host,
    )
    # CSP, X-Frame-Options on every answer (the UI may frame the preview origin)
    app.add_middleware(BrowserHeadersMiddleware, frame_origin=links_of(settings).frame_source())
    if settings.metrics:  # request durations by route template (GET /metrics)
        app.add_middleware(HttpMetricsMiddleware, routes=routes)
    if traced:  # metrics and traces: a span per request, outermost (traces on only)
        app.add_middleware(TracingMiddleware)
    app.state.settings = settings
    app.state.store = store
    app.state.manager = manager
    app.state.mcp = mcp_servers
    # runtimes: those a run may pick (backend/api/runtimes.py: RUNTIMES, never an
    # unsandboxed one beside a sandboxed default); offered at once: the configured one and
    # those that need nothing outside the server; the others once the probe at start-up
    # found them working (_probe_runtimes)
    app.state.runtimes_allowed = runtimes_api.allowed(settings, manager)
    app.state.runtimes_available = runtimes_api.offered_at_start(
        settings, app.state.runtimes_allowed
    )
    return app


def metrics_route(settings: Settings, store: Store) -> Route:
    """GET /metrics (metrics and traces, backend/observe)."""
    return observe_endpoint.route(
        observe_endpoint.Exposition(store.engine, settings.metrics_token, QUEUE)
    )


async def _probe_runtimes(app: Starlette, manager: RunManager) -> None:
    """Offer each runtime that needs something outside the server (an engine, an image) once
    it started and says it is available; in registry order."""
    registry = runtimes_for(app.state.settings)
    for name in registry.names():
        if registry.get(name).always_available:
            continue
        if name not in app.state.runtimes_allowed:  # runtimes: not offered here
            continue
        try:
            # constructing one may import its SDK (docker's): off the event loop
            runtime = await anyio.to_thread.run_sync(manager.runtime, name)
            await runtime.start()
            ok = await runtime.available()
        except Exception as exc:  # no SDK, no engine: not offered
            # not the configured runtime: expected, no advice to change RUNTIME
            level = logging.DEBUG if app.state.settings.runtime != name else logging.WARNING
            log.log(level, "%s runtime not available: %s", name, exc)
            ok = False
        offered = app.state.runtimes_available
        if ok and name not in offered:
            order = registry.names()
            app.state.runtimes_available = sorted([*offered, name], key=order.index)


async def _no_ui(_request: Request) -> Response:
    return Response(
        "<!doctype html><title>planact</title><p>planact API is running. The web UI is not "
        "built: run <code>make run</code> (it builds frontend/).</p>",
        media_type="text/html",
    )
