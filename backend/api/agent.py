"""POST /api/agent/run, GET …/runs/{id}/events, POST …/runs/{id}/stop."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from backend.api import runtimes
from backend.api.common import ident, is_id, manager, read_model, seq_param, store, user_id
from backend.api.errors import ApiError
from backend.api.models import SEQ, STREAM_EVENTS, RunStarted, RunStopping, StartRunBody
from backend.api.settings import pick_model
from backend.api.sse import feed_response
from backend.openapi import Param, Reply, operation
from backend.runs import ShuttingDown
from backend.runs.feed import run_feed
from backend.runtime.registry import for_settings
from backend.store.repo import ConflictError, NotFoundError, RestoringError

GOAL_LIMIT = 100_000
RUN_HEADERS = {"X-Conversation-Id": "The run's conversation.", "X-Run-Id": "The run."}
STREAM = Reply(
    200,
    "The run's stream (docs/api.md, 'The stream': `message`, `delta` and one `end` event).",
    media_type="text/event-stream",
    events=STREAM_EVENTS,
    headers=RUN_HEADERS,
)
RUN_ID = {"run_id": "$response.body#/run_id"}
STARTED = Reply(
    202,
    "Started (with `Accept: application/json`).",
    RunStarted,
    headers=RUN_HEADERS,
    links={
        "Events": ("run_events_route_get", RUN_ID),
        "Stop": ("stop_run_post", RUN_ID),
        "Retry": ("retry_run_post", RUN_ID),
        "Conversation": ("get_conversation_get", {"cid": "$response.body#/conversation_id"}),
    },
)


@operation(
    "Start a run",
    tag="runs",
    body=StartRunBody,
    replies=(STREAM, STARTED),
    errors=(404, 409, 413, 415, 503),
    description="Answers the run's event stream, or 202 at once with "
    "`Accept: application/json`. 413: a goal over 100,000 characters or a body over 1 MB; "
    "503: the server is shutting down.",
)
async def start_run(request: Request) -> Response:
    body = await read_model(request, StartRunBody)
    goal = body.goal if body.goal is not None else body.question
    if goal is None or not goal.strip():
        raise ApiError(400, "'goal' is required: a non-empty string.")
    if len(goal) > GOAL_LIMIT:
        raise ApiError(413, f"'goal' is longer than {GOAL_LIMIT} characters.")
    cid = body.conversation_id
    if cid is not None and not cid:
        raise ApiError(400, "'conversation_id' must be a string.")
    if cid is not None and not is_id(cid):
        raise ApiError(404, f"No conversation {cid[:80]!r}.")
    mode = body.mode
    runtime = body.runtime
    known = for_settings(request.app.state.settings).names()
    if runtime is not None and runtime not in known:
        raise ApiError(400, f"'runtime' must be one of {', '.join(known)}.")
    if runtime is not None and runtime not in request.app.state.runtimes_available:
        state = request.app.state
        why = runtimes.refusal(state.settings, manager(request), runtime, state.runtimes_allowed)
        raise ApiError(400, why)
    model = pick_model(request.app.state.settings, body.model)
    mcp_servers = pick_mcp_servers(request, body.mcp_servers)
    approval = body.approval
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
    except RestoringError as exc:
        raise ApiError(
            409, "A rewind is putting this conversation's files back: retry in a moment."
        ) from exc
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
        started = RunStarted(conversation_id=cid, run_id=rid)
        return JSONResponse(started.model_dump(), 202, headers=headers)
    feed = run_feed(store(request), runs.notifier, cid, rid)
    return feed_response(feed, headers, send_timeout(request))


@operation(
    "Follow a run's stream",
    tag="runs",
    params=(
        Param(
            "after", description="Replay after this seq (or the Last-Event-ID header).", schema=SEQ
        ),
        Param("Last-Event-ID", "header", "Replay after this seq (SSE reconnection).", schema=SEQ),
    ),
    replies=(STREAM,),
    errors=(404,),
    description="Replays the run's messages from the start (or after a seq), then follows "
    "it live until it ends. 400: a seq that is not a non-negative integer.",
)
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
    headers = {"X-Conversation-Id": run.conversation_id, "X-Run-Id": rid}
    feed = run_feed(store(request), manager(request).notifier, run.conversation_id, rid, after)
    return feed_response(feed, headers, send_timeout(request))


def send_timeout(request: Request) -> float:
    # a bit over the server's write timeout, which closes the connection first under
    # `planact serve`; this one also holds under any other ASGI server
    return float(request.app.state.settings.http_write_timeout) + 10.0


@operation(
    "Stop a run",
    tag="runs",
    replies=(Reply(202, "Stopping: the stream ends with status `stopped`.", RunStopping),),
    errors=(404,),
)
async def stop_run(request: Request) -> Response:
    rid = ident(request, "run_id", "run")
    run = await store(request).get_run(rid, user_id(request))
    if run is None:
        raise ApiError(404, f"No run {rid!r}.")
    stopping = await manager(request).stop(rid)  # recorded in the store; any process
    answer = RunStopping(run_id=rid, status="stopping" if stopping else run.status)
    return JSONResponse(answer.model_dump(), 202)


routes = [
    Route("/api/agent/run", start_run, methods=["POST"]),
    Route("/api/agent/runs/{run_id}/events", run_events_route, methods=["GET"]),
    Route("/api/agent/runs/{run_id}/stop", stop_run, methods=["POST"]),
]
