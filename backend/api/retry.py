"""POST /api/agent/runs/{run_id}/retry: run a failed or stopped run's goal again, in the
same conversation with the same mode; answers like POST /api/agent/run."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from backend.api.agent import begin_run
from backend.api.common import ident, store, user_id
from backend.api.errors import ApiError
from backend.api.settings import optional_json, pick_model

RETRYABLE = ("failed", "stopped")


async def retry_run(request: Request) -> Response:
    rid = ident(request, "run_id", "run")
    body = await optional_json(request)
    model = pick_model(request.app.state.settings, body.get("model"))
    run = await store(request).get_run(rid, user_id(request))
    if run is None:
        raise ApiError(404, f"No run {rid!r}.")
    if run["status"] not in RETRYABLE:
        raise ApiError(
            409, f"Only a failed or stopped run can be retried; this one is {run['status']}."
        )
    runtime = run["runtime"] if run["runtime"] in request.app.state.runtimes_available else None
    return await begin_run(
        request,
        run["goal"],
        conversation_id=run["conversation_id"],
        mode=run["mode"],
        runtime=runtime,
        model=model,
        approval=run.get("approval"),
    )


routes = [Route("/api/agent/runs/{run_id}/retry", retry_run, methods=["POST"])]
