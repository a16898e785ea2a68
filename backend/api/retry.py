"""POST /api/agent/runs/{run_id}/retry: run a failed or stopped run's goal again, in the
same conversation with the same mode; answers like POST /api/agent/run."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from backend.api.common import manager, store, user_id
from backend.api.errors import ApiError
from backend.api.settings import optional_json, pick_model
from backend.api.sse import run_events, sse_response
from backend.store.repo import ConflictError, NotFoundError

RETRYABLE = ("failed", "stopped")


async def retry_run(request: Request) -> Response:
    rid = request.path_params["run_id"]
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
    runs = manager(request)
    try:
        cid, new_rid = await runs.start(
            user_id(request),
            run["goal"],
            conversation_id=run["conversation_id"],
            mode=run["mode"],
            runtime=runtime,
            model=model,
        )
    except NotFoundError as exc:
        raise ApiError(404, f"No run {rid!r}.") from exc
    except ConflictError as exc:
        raise ApiError(
            409, "A run is already active in this conversation: stop it or wait for it to end."
        ) from exc
    headers = {"X-Conversation-Id": cid, "X-Run-Id": new_rid}
    if "application/json" in request.headers.get("accept", ""):
        return JSONResponse({"conversation_id": cid, "run_id": new_rid}, 202, headers=headers)
    return sse_response(run_events(store(request), runs.bus, cid, new_rid), headers)


routes = [Route("/api/agent/runs/{run_id}/retry", retry_run, methods=["POST"])]
