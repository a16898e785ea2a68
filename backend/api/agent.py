"""POST /api/agent/run, GET …/runs/{id}/events, POST …/runs/{id}/stop."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from backend.api.common import manager, read_json, store, user_id
from backend.api.errors import ApiError
from backend.api.settings import pick_model
from backend.api.sse import run_events, sse_response
from backend.store.repo import ConflictError, NotFoundError

GOAL_LIMIT = 100_000
MODES = ("auto", "agent", "chat")
RUNTIMES = ("local", "docker")


async def start_run(request: Request) -> Response:
    body = await read_json(request)
    goal = body.get("goal", body.get("question"))
    if not isinstance(goal, str) or not goal.strip():
        raise ApiError(400, "'goal' is required: a non-empty string.")
    if len(goal) > GOAL_LIMIT:
        raise ApiError(413, f"'goal' is longer than {GOAL_LIMIT} characters.")
    cid = body.get("conversation_id")
    if cid is not None and (not isinstance(cid, str) or not cid):
        raise ApiError(400, "'conversation_id' must be a string.")
    mode = body.get("mode", "auto")
    if mode not in MODES:
        raise ApiError(400, f"'mode' must be one of {', '.join(MODES)}.")
    runtime = body.get("runtime")
    if runtime is not None and runtime not in RUNTIMES:
        raise ApiError(400, f"'runtime' must be one of {', '.join(RUNTIMES)}.")
    if runtime is not None and runtime not in request.app.state.runtimes_available:
        raise ApiError(
            400,
            f"The {runtime} runtime is not available on this server (no Docker engine "
            "answers, or the sandbox image is missing: see docs/docker.md).",
        )
    model = pick_model(request.app.state.settings, body.get("model"))  # issue 13
    runs = manager(request)
    try:
        cid, rid = await runs.start(
            user_id(request), goal, conversation_id=cid, mode=mode, runtime=runtime, model=model
        )
    except NotFoundError as exc:
        raise ApiError(404, f"No conversation {cid!r}.") from exc
    except ConflictError as exc:
        raise ApiError(
            409, "A run is already active in this conversation: stop it or wait for it to end."
        ) from exc
    headers = {"X-Conversation-Id": cid, "X-Run-Id": rid}
    if "application/json" in request.headers.get("accept", ""):
        return JSONResponse({"conversation_id": cid, "run_id": rid}, 202, headers=headers)
    return sse_response(run_events(store(request), runs.bus, cid, rid), headers)


async def run_events_route(request: Request) -> Response:
    rid = request.path_params["run_id"]
    run = await store(request).get_run(rid, user_id(request))
    if run is None:
        raise ApiError(404, f"No run {rid!r}.")
    after_raw = request.headers.get("last-event-id") or request.query_params.get("after") or "0"
    try:
        after = int(after_raw)
    except ValueError as exc:
        raise ApiError(400, "Last-Event-ID / 'after' must be an integer seq.") from exc
    headers = {"X-Conversation-Id": run["conversation_id"], "X-Run-Id": rid}
    return sse_response(
        run_events(store(request), manager(request).bus, run["conversation_id"], rid, after),
        headers,
    )


async def stop_run(request: Request) -> Response:
    rid = request.path_params["run_id"]
    run = await store(request).get_run(rid, user_id(request))
    if run is None:
        raise ApiError(404, f"No run {rid!r}.")
    await manager(request).stop(rid)
    return JSONResponse({"run_id": rid, "status": "stopping"}, 202)


routes = [
    Route("/api/agent/run", start_run, methods=["POST"]),
    Route("/api/agent/runs/{run_id}/events", run_events_route, methods=["GET"]),
    Route("/api/agent/runs/{run_id}/stop", stop_run, methods=["POST"]),
]
