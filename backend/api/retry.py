"""POST /api/agent/runs/{run_id}/retry: run a failed or stopped run's goal again, in the
same conversation with the same mode; answers like POST /api/agent/run."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from backend.api.agent import STARTED, STREAM, begin_run
from backend.api.common import ident, read_model, store, user_id
from backend.api.errors import ApiError
from backend.api.models import ModelChoiceBody
from backend.api.settings import pick_model
from backend.openapi import operation

RETRYABLE = ("failed", "stopped")


@operation(
    "Retry a failed or stopped run",
    tag="runs",
    body=ModelChoiceBody,
    body_required=False,
    replies=(STREAM, STARTED),
    errors=(404, 409, 413, 415, 503),
    description="Runs the goal again in the same conversation; answers like POST "
    "/api/agent/run. 409: the run is not failed or stopped, or another run is active.",
)
async def retry_run(request: Request) -> Response:
    rid = ident(request, "run_id", "run")
    body = await read_model(request, ModelChoiceBody, optional=True)
    model = pick_model(request.app.state.settings, body.model)
    run = await store(request).get_run(rid, user_id(request))
    if run is None:
        raise ApiError(404, f"No run {rid!r}.")
    if run.status not in RETRYABLE:
        raise ApiError(
            409, f"Only a failed or stopped run can be retried; this one is {run.status}."
        )
    runtime = run.runtime if run.runtime in request.app.state.runtimes_available else None
    return await begin_run(
        request,
        run.goal,
        conversation_id=run.conversation_id,
        mode=run.mode,
        runtime=runtime,
        model=model,
        approval=run.approval,
    )


routes = [Route("/api/agent/runs/{run_id}/retry", retry_run, methods=["POST"])]
