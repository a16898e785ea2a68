"""Conversations: list (and search), one, its messages, rename, delete."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from backend.api.common import conversation_or_404, manager, read_json, seq_param, store, user_id
from backend.api.errors import ApiError
from backend.api.uploads import clean_title
from backend.store.repo import ConflictError

QUERY_LIMIT = 500


async def list_conversations(request: Request) -> Response:
    q = request.query_params.get("q", "")
    if len(q) > QUERY_LIMIT:
        raise ApiError(400, f"'q' is longer than {QUERY_LIMIT} characters.")
    if "\x00" in q:
        raise ApiError(400, "'q' may not contain NUL.")
    return JSONResponse(await store(request).list_conversations(user_id(request), q))


async def rename_conversation(request: Request) -> Response:
    cid = request.path_params["cid"]
    body = await read_json(request)
    if "title" not in body:
        raise ApiError(400, "'title' is required.")
    title = clean_title(body["title"])
    if not title:
        raise ApiError(400, "'title' may not be empty.")
    if not await store(request).rename_conversation(user_id(request), cid, title):
        raise ApiError(404, f"No conversation {cid!r}.")
    return JSONResponse(await conversation_or_404(request, cid))


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
    Route("/api/conversations/{cid}", rename_conversation, methods=["PATCH"]),
    Route("/api/conversations/{cid}/messages", conversation_messages, methods=["GET"]),
]
