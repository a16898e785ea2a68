"""POST /api/agent/runs/{run_id}/approvals/{uuid} and …/answers/{uuid}: a person answers a
run that waits (docs/api.md "Runs that wait for a person"), on any process, through the seam in
backend/waits."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from backend.api.common import ident, manager, read_model, user_id
from backend.api.errors import ApiError
from backend.api.models import AnswerBody, Answered, ApprovalBody, Decision
from backend.openapi import Reply, operation
from backend.waits import WaitError, answer_approval, answer_question


@operation(
    "Answer an approval",
    tag="waits",
    body=ApprovalBody,
    replies=(Reply(200, "Recorded; the run goes on.", Decision),),
    errors=(404, 409, 413, 415),
    description="409: that approval is no longer pending.",
)
async def approve_route(request: Request) -> Response:
    rid = ident(request, "run_id", "run")
    uid = ident(request, "uuid", "approval")
    body = await read_model(request, ApprovalBody)
    try:
        out = await answer_approval(
            manager(request),
            rid,
            uid,
            body.decision,
            body.reason,
            user_id=user_id(request),
            digest=body.digest,
        )
    except WaitError as exc:
        raise ApiError(exc.status, str(exc)) from exc
    return JSONResponse(out.model_dump())


@operation(
    "Answer a question",
    tag="waits",
    body=AnswerBody,
    replies=(Reply(200, "Recorded; the run goes on.", Answered),),
    errors=(404, 409, 413, 415),
    description="409: that question is no longer pending.",
)
async def answer_route(request: Request) -> Response:
    rid = ident(request, "run_id", "run")
    uid = ident(request, "uuid", "question")
    body = await read_model(request, AnswerBody)
    try:
        out = await answer_question(
            manager(request), rid, uid, body.answer, user_id=user_id(request)
        )
    except WaitError as exc:
        raise ApiError(exc.status, str(exc)) from exc
    return JSONResponse(out.model_dump())


routes = [
    Route("/api/agent/runs/{run_id}/approvals/{uuid}", approve_route, methods=["POST"]),
    Route("/api/agent/runs/{run_id}/answers/{uuid}", answer_route, methods=["POST"]),
]
