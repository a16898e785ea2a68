"""Conversations: list, one, its messages, delete."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from backend.api.common import conversation_or_404, manager, seq_param, store, user_id
from backend.api.errors import ApiError
from backend.store.repo import ConflictError


async def list_conversations(request: Request) -> Response:
    return JSONResponse(await store(request).list_conversations(user_id(request)))


async def get_conversation(request: Request) -> Response:
    return JSONResponse(await conversation_or_404(request, request.path_params["cid"]))


async def conversation_messages(request: Request) -> Response:
    cid = request.path_params["cid"]
    await conversation_or_404(request, cid)
    after = seq_param(request.query_params.get("after"), "'after'")
    msgs = await store(request).messages(cid, after=after, limit=1_000_000)
    return JSONResponse([m.to_dict() for m in msgs])


async def delete_conversation(request: Request) -> Response:
    cid = request.path_params["cid"]
    await conversation_or_404(request, cid)
    try:
        deleted = await manager(request).delete_conversation(user_id(request), cid)
    except ConflictError as exc:
        raise ApiError(
            409, "The conversation's run did not stop in time; nothing was deleted. Retry."
        ) from exc
    if not deleted:
        raise ApiError(404, f"No conversation {cid!r}.")
    return JSONResponse({"deleted": cid})


routes = [
    Route("/api/conversations", list_conversations, methods=["GET"]),
    Route("/api/conversations/{cid}", get_conversation, methods=["GET"]),
    Route("/api/conversations/{cid}", delete_conversation, methods=["DELETE"]),
    Route("/api/conversations/{cid}/messages", conversation_messages, methods=["GET"]),
]
