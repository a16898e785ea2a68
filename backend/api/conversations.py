"""Conversations: list (and search), one, its messages, rename, delete."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from backend.api.common import conversation_or_404, manager, read_model, seq_param, store, user_id
from backend.api.errors import ApiError
from backend.api.models import (
    SEQ,
    ConversationDetail,
    ConversationSummary,
    Deleted,
    RenameBody,
)
from backend.api.uploads import clean_title
from backend.messages.message import Message
from backend.openapi import Param, Reply, operation
from backend.store.repo import ConflictError

QUERY_LIMIT = 500


@operation(
    "List conversations",
    tag="conversations",
    params=(Param("q", description="Keep those whose title or a goal contains it."),),
    replies=(Reply(200, "Newest first.", list[ConversationSummary]),),
    description="400: `q` longer than 500 characters or with a NUL.",
)
async def list_conversations(request: Request) -> Response:
    q = request.query_params.get("q", "")
    if len(q) > QUERY_LIMIT:
        raise ApiError(400, f"'q' is longer than {QUERY_LIMIT} characters.")
    if "\x00" in q:
        raise ApiError(400, "'q' may not contain NUL.")
    found = await store(request).list_conversations(user_id(request), q)
    return JSONResponse([c.model_dump() for c in found])


@operation(
    "Rename a conversation",
    tag="conversations",
    body=RenameBody,
    replies=(Reply(200, "The renamed conversation.", ConversationDetail),),
    errors=(404, 413, 415),
)
async def rename_conversation(request: Request) -> Response:
    cid = request.path_params["cid"]
    body = await read_model(request, RenameBody)
    title = clean_title(body.title)
    if not title:
        raise ApiError(400, "'title' may not be empty.")
    if not await store(request).rename_conversation(user_id(request), cid, title):
        raise ApiError(404, f"No conversation {cid!r}.")
    return JSONResponse((await conversation_or_404(request, cid)).model_dump())


@operation(
    "One conversation",
    tag="conversations",
    replies=(Reply(200, "With its status, token totals and runs.", ConversationDetail),),
    errors=(404,),
)
async def get_conversation(request: Request) -> Response:
    conv = await conversation_or_404(request, request.path_params["cid"])
    return JSONResponse(conv.model_dump())


@operation(
    "A conversation's messages",
    tag="conversations",
    params=(
        Param("after", description="Only messages after this seq.", schema=SEQ),
        Param(
            "all",
            description="1: the messages a rewind took out of the history too.",
            schema={"type": "string", "enum": ["0", "1"]},
        ),
    ),
    replies=(Reply(200, "In seq order, the same JSON as the stream.", list[Message]),),
    errors=(404,),
)
async def conversation_messages(request: Request) -> Response:
    cid = request.path_params["cid"]
    await conversation_or_404(request, cid)
    after = seq_param(request.query_params.get("after"), "'after'")
    every = request.query_params.get("all", "0")
    if every not in ("0", "1"):
        raise ApiError(400, "'all' must be 0 or 1.")
    msgs = await store(request).messages(
        cid, after=after, limit=1_000_000, include_hidden=every == "1"
    )
    return JSONResponse([m.to_dict() for m in msgs])


@operation(
    "Delete a conversation",
    tag="conversations",
    replies=(Reply(200, "Deleted, with its messages and workspace.", Deleted),),
    errors=(404, 409),
    description="409: its run did not stop in time (nothing was deleted).",
)
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
    return JSONResponse(Deleted(deleted=cid).model_dump())


routes = [
    Route("/api/conversations", list_conversations, methods=["GET"]),
    Route("/api/conversations/{cid}", get_conversation, methods=["GET"]),
    Route("/api/conversations/{cid}", delete_conversation, methods=["DELETE"]),
    Route("/api/conversations/{cid}", rename_conversation, methods=["PATCH"]),
    Route("/api/conversations/{cid}/messages", conversation_messages, methods=["GET"]),
]
