"""POST /api/agent/runs/{run_id}/approvals/{uuid} and …/answers/{uuid}: a person answers a
run that waits (CONTRACT section 10), on any process, through the seam in backend/waits."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from backend.api.common import ident, manager, read_json, user_id
from backend.api.errors import ApiError
from backend.waits import WaitError, answer_approval, answer_question


async def approve_route(request: Request) -> Response:
    rid = ident(request, "run_id", "run")
    uid = ident(request, "uuid", "approval")
    body = await read_json(request)
    try:
        out = await answer_approval(
            manager(request),
            rid,
            uid,
            body.get("decision"),
            body.get("reason"),
            user_id=user_id(request),
            digest=body.get("digest"),
        )
    except WaitError as exc:
        raise ApiError(exc.status, str(exc)) from exc
    return JSONResponse(out)


async def answer_route(request: Request) -> Response:
    rid = ident(request, "run_id", "run")
    uid = ident(request, "uuid", "question")
    body = await read_json(request)
    try:
        out = await answer_question(
            manager(request), rid, uid, body.get("answer"), user_id=user_id(request)
        )
    except WaitError as exc:
        raise ApiError(exc.status, str(exc)) from exc
    return JSONResponse(out)


routes = [
    Route("/api/agent/runs/{run_id}/approvals/{uuid}", approve_route, methods=["POST"]),
    Route("/api/agent/runs/{run_id}/answers/{uuid}", answer_route, methods=["POST"]),
]
