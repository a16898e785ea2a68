"""GET /api/ready: 200 when this process can take work (backend/readiness), 503 with the
reasons otherwise. No token needed, like /api/health (which stays a liveness check)."""

from __future__ import annotations

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from backend.api.common import manager, store
from backend.api.models import ErrorDetail, Readiness, ReadyCheck
from backend.openapi import Reply, operation
from backend.readiness import check_database, check_runtime


@operation(
    "Readiness",
    tag="operating",
    public=True,
    replies=(
        Reply(200, "Ready: the database, its migrations and the default runtime work.", Readiness),
        Reply(503, "Not ready, with the reasons.", Readiness),
    ),
)
async def ready(request: Request) -> Response:
    name = request.app.state.settings.runtime
    # constructing a runtime may import its SDK (docker's): off the event loop
    runtime = await anyio.to_thread.run_sync(manager(request).runtime, name)
    database, migrations = await check_database(store(request).engine)
    checks = {
        "database": database,
        "migrations": migrations,
        "runtime": await check_runtime(name, runtime),
    }
    reasons = [c.detail for c in checks.values() if not c.ok]
    answer = Readiness(
        status="unready" if reasons else "ready",
        checks={k: ReadyCheck(ok=c.ok, detail=c.detail) for k, c in checks.items()},
        reasons=reasons,
        error=ErrorDetail(code="unavailable", message="; ".join(reasons)) if reasons else None,
    )
    return JSONResponse(answer.model_dump(exclude_none=True), 503 if reasons else 200)


routes = [Route("/api/ready", ready, methods=["GET"])]
