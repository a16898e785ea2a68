"""POST /api/agent/runs/{run_id}/approvals/{uuid} and …/answers/{uuid}: a person answers a
run that waits (docs/api.md "Runs that wait for a person"), on any process, through the seam in
backend/waits. Both routes are made by one maker: they differ only in the body they read,
what they reply and the call that records the answer."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from backend.api.common import ident, manager, read_model, user_id
from backend.api.errors import ApiError
from backend.api.models import AnswerBody, Answered, ApprovalBody, Decision
from backend.openapi import Reply, operation
from backend.waits import WaitError, answer_approval, answer_question

B = TypeVar("B", bound=BaseModel)
# records the answer: (the request, the run's id, the wait's uuid, the body) -> the reply
Record = Callable[[Request, str, str, B], Awaitable[BaseModel]]


def wait_route(
    name: str,
    summary: str,
    what: str,
    body_model: type[B],
    reply: type[BaseModel],
    record: Record[B],
) -> Callable[[Request], Awaitable[Response]]:
    """The route (``name``: its operationId) that answers a waiting run's ``what`` (an
    approval, a question) with a body of ``body_model``: 404 for an unknown run or wait,
    409 once it is no longer pending."""

    @operation(
        summary,
        tag="waits",
        body=body_model,
        replies=(Reply(200, "Recorded; the run goes on.", reply),),
        errors=(404, 409, 413, 415),
        description=f"409: that {what} is no longer pending.",
    )
    async def route(request: Request) -> Response:
        rid = ident(request, "run_id", "run")
        uid = ident(request, "uuid", what)
        body = await read_model(request, body_model)
        try:
            out = await record(request, rid, uid, body)
        except WaitError as exc:
            raise ApiError(exc.status, str(exc)) from exc
        return JSONResponse(out.model_dump())

    route.__name__ = route.__qualname__ = name  # the OpenAPI operationId
    return route


async def _approve(request: Request, rid: str, uid: str, body: ApprovalBody) -> Decision:
    return await answer_approval(
        manager(request),
        rid,
        uid,
        body.decision,
        body.reason,
        user_id=user_id(request),
        digest=body.digest,
    )


async def _answer(request: Request, rid: str, uid: str, body: AnswerBody) -> Answered:
    return await answer_question(manager(request), rid, uid, body.answer, user_id=user_id(request))


approve_route = wait_route(
    "approve_route", "Answer an approval", "approval", ApprovalBody, Decision, _approve
)
answer_route = wait_route(
    "answer_route", "Answer a question", "question", AnswerBody, Answered, _answer
)

routes = [
    Route("/api/agent/runs/{run_id}/approvals/{uuid}", approve_route, methods=["POST"]),
    Route("/api/agent/runs/{run_id}/answers/{uuid}", answer_route, methods=["POST"]),
]
