"""POST /api/agent/run, GET …/runs/{id}/events, POST …/runs/{id}/stop."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from backend.api import runtimes
from backend.api.common import ident, is_id, manager, read_json, seq_param, store, user_id
from backend.api.errors import ApiError
from backend.api.settings import pick_model
from backend.api.sse import sse_events, sse_response
from backend.runs import ShuttingDown
from backend.runs.feed import run_feed
from backend.runtime import registry
from backend.store.repo import ConflictError, NotFoundError
from backend.waits.classes import APPROVAL_MODES

GOAL_LIMIT = 100_000
MODES = ("auto", "agent", "chat")


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
    if cid is not None and not is_id(cid):
        raise ApiError(404, f"No conversation {cid[:80]!r}.")
    mode = body.get("mode", "auto")
    if mode not in MODES:
        raise ApiError(400, f"'mode' must be one of {', '.join(MODES)}.")
    runtime = body.get("runtime")
    if runtime is not None and runtime not in registry.names():
        raise ApiError(400, f"'runtime' must be one of {', '.join(registry.names())}.")
    if runtime is not None and runtime not in request.app.state.runtimes_available:
        state = request.app.state
        why = runtimes.refusal(state.settings, manager(request), runtime, state.runtimes_allowed)
        raise ApiError(400, why)
    model = pick_model(request.app.state.settings, body.get("model"))
    mcp_servers = pick_mcp_servers(request, body.get("mcp_servers"))
    approval = body.get("approval")
    if approval is not None and approval not in APPROVAL_MODES:
        raise ApiError(400, f"'approval' must be one of {', '.join(APPROVAL_MODES)}.")
    return await begin_run(
        request,
        goal,
        conversation_id=cid,
        mode=mode,
        runtime=runtime,
        model=model,
        mcp_servers=mcp_servers,
        approval=approval,
    )


def pick_mcp_servers(request: Request, value: object) -> list[str] | None:
    """The run's ``mcp_servers``: a list of configured MCP server names (None: all)."""
    if value is None:
        return None
    configured: list[str] = request.app.state.mcp.names
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ApiError(400, "'mcp_servers' must be a list of MCP server names.")
    unknown = [v for v in value if v not in configured]
    if unknown:
        raise ApiError(
            400,
            f"'mcp_servers' names unknown server(s): {', '.join(repr(u[:80]) for u in unknown)}; "
            f"configured: {', '.join(configured) or 'none (MCP_SERVERS_FILE)'}.",
        )
    return list(dict.fromkeys(value))


async def begin_run(
    request: Request,
    goal: str,
    *,
    conversation_id: str | None,
    mode: str,
    runtime: str | None,
    model: str | None,
    mcp_servers: list[str] | None = None,
    approval: str | None = None,
) -> Response:
    """Start a run and answer with its stream (or 202 with `Accept: application/json`)."""
    runs = manager(request)
    try:
        cid, rid = await runs.start(
            user_id(request),
            goal,
            conversation_id=conversation_id,
            mode=mode,
            runtime=runtime,
            model=model,
            mcp_servers=mcp_servers,
            approval=approval,
        )
    except NotFoundError as exc:
        raise ApiError(404, f"No conversation {conversation_id!r}.") from exc
    except ConflictError as exc:
        raise ApiError(
            409, "A run is already active in this conversation: stop it or wait for it to end."
        ) from exc
    except ShuttingDown as exc:
        raise ApiError(
            503, "This server is shutting down and takes no new runs: retry on another one."
        ) from exc
    headers = {"X-Conversation-Id": cid, "X-Run-Id": rid}
    if "application/json" in request.headers.get("accept", ""):
        return JSONResponse({"conversation_id": cid, "run_id": rid}, 202, headers=headers)
    feed = run_feed(store(request), runs.notifier, cid, rid)
    return sse_response(sse_events(feed), headers, send_timeout(request))


async def run_events_route(request: Request) -> Response:
    rid = ident(request, "run_id", "run")
    # checked before the stream starts: a bad value is a JSON 400, never a broken stream
    if last_id := request.headers.get("last-event-id"):
        after = seq_param(last_id, "Last-Event-ID")
    else:
        after = seq_param(request.query_params.get("after"), "'after'")
    run = await store(request).get_run(rid, user_id(request))
    if run is None:
        raise ApiError(404, f"No run {rid!r}.")
    headers = {"X-Conversation-Id": run["conversation_id"], "X-Run-Id": rid}
    feed = run_feed(store(request), manager(request).notifier, run["conversation_id"], rid, after)
    return sse_response(sse_events(feed), headers, send_timeout(request))


def send_timeout(request: Request) -> float:
    # a bit over the server's write timeout, which closes the connection first under
    # `planact serve`; this one also holds under any other ASGI server
    return float(request.app.state.settings.http_write_timeout) + 10.0


async def stop_run(request: Request) -> Response:
    rid = ident(request, "run_id", "run")
    run = await store(request).get_run(rid, user_id(request))
    if run is None:
        raise ApiError(404, f"No run {rid!r}.")
    stopping = await manager(request).stop(rid)  # recorded in the store; any process
    return JSONResponse({"run_id": rid, "status": "stopping" if stopping else run["status"]}, 202)


routes = [
    Route("/api/agent/run", start_run, methods=["POST"]),
    Route("/api/agent/runs/{run_id}/events", run_events_route, methods=["GET"]),
    Route("/api/agent/runs/{run_id}/stop", stop_run, methods=["POST"]),
]
