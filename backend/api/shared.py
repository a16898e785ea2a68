"""The read-only view of a shared conversation: GET /api/shared/{token} and its files, with
no login (backend/api/auth.py lets these two GET routes through, and nothing else takes the
token: it is not a credential of any other route). A snapshot: the messages in the history
and the workspace's files when it was shared; previews are left out."""

from __future__ import annotations

import json
import mimetypes
from typing import Any
from urllib.parse import quote

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from backend.api.common import is_id, manager
from backend.api.errors import ApiError
from backend.api.headers import DOWNLOAD_HEADERS, download_media_type
from backend.api.names import attachment_header
from backend.checkpoints import CheckpointNotFound
from backend.checkpoints.gitrepo import GitError
from backend.messages.message import Message
from backend.openapi import Param, Reply, operation
from backend.store.base import iso
from backend.store.checkpoints import StoredShare

SHARED_PREFIX = "/api/shared/"
PREVIEW_KIND = "preview"


class SharedConversation(BaseModel):
    conversation_id: str
    title: str
    shared_at: str | None


class SharedFileEntry(BaseModel):
    filepath: str
    filename: str
    url: str
    filesize: int


class SharedView(BaseModel):
    conversation: SharedConversation
    messages: list[Message]
    files: list[SharedFileEntry]


async def _share(request: Request) -> StoredShare:
    token = str(request.path_params["token"])
    found = await manager(request).store.share_by_token(token) if is_id(token) else None
    if found is None:
        raise ApiError(404, "No such shared conversation (the link may have been revoked).")
    return found


PREVIEW_NOTE = "A preview (not shared)."
HIDDEN_URL = "(a preview, not shared)"


def _preview_urls(msgs: list[Message]) -> set[str]:
    """Every preview address the messages hold (each carries its preview's token)."""
    urls: set[str] = set()
    for msg in msgs:
        if msg.meta.action_type == PREVIEW_KIND and msg.meta.url:
            urls.add(msg.meta.url)
        for item in msg.to_dict()["meta"].get("json") or []:
            entry = item.get("preview", item) if isinstance(item, dict) else None
            about_preview = msg.meta.action_type == PREVIEW_KIND or "preview" in item
            if about_preview and isinstance(entry, dict) and isinstance(entry.get("url"), str):
                urls.add(entry["url"])
    return {u for u in urls if u}


def _scrub(value: Any, urls: set[str]) -> Any:
    if isinstance(value, str):
        for url in urls:
            value = value.replace(url, HIDDEN_URL)
        return value
    if isinstance(value, list):
        return [_scrub(v, urls) for v in value if not (isinstance(v, dict) and "preview" in v)]
    if isinstance(value, dict):
        return {k: _scrub(v, urls) for k, v in value.items()}
    return value


def shown(msgs: list[Message]) -> list[dict[str, Any]]:
    """The messages as the shared view shows them: a preview is named, never linked (its
    address holds the person's token), wherever a message mentions it."""
    urls = _preview_urls(msgs)
    out = []
    for msg in msgs:
        data = msg.to_dict()
        if msg.meta.action_type == PREVIEW_KIND:
            data["content"] = PREVIEW_NOTE
            data["meta"].update(url="", json=[], content="Preview")
        out.append(_scrub(data, urls))
    return out


@operation(
    "A shared conversation",
    tag="shared",
    replies=(Reply(200, "Its messages and files as they were when it was shared.", SharedView),),
    errors=(404,),
    description="No login: the link's token is all it takes. 404 once revoked.",
    public=True,
)
async def shared_view(request: Request) -> Response:
    share = await _share(request)
    mgr = manager(request)
    repo = mgr.checkpoint_repo(share.user_id, share.conversation_id)
    msgs = await mgr.store.messages_at(share.conversation_id, json.loads(share.seqs))
    try:
        files = await mgr.checkpoints.shared_files(repo, share)
    except GitError as exc:
        raise ApiError(404, "The shared snapshot is no longer there.") from exc
    token = share.token
    view = SharedView(
        conversation=SharedConversation(
            conversation_id=share.conversation_id,
            title=share.title,
            shared_at=iso(share.created_at),
        ),
        messages=msgs,
        files=[
            SharedFileEntry(
                filepath=f.path,
                filename=f.path.rsplit("/", 1)[-1],
                url=f"{SHARED_PREFIX}{token}/files/{quote(f.path)}",
                filesize=f.size,
            )
            for f in files
            if not f.link
        ],
    )
    body = view.model_dump(by_alias=True)
    body["messages"] = shown(msgs)
    return JSONResponse(body)


@operation(
    "A shared conversation's file",
    tag="shared",
    params=(Param("path", "path", "The file's path in the shared workspace."),),
    replies=(Reply(200, "The file as it was when shared, as an attachment.", media_type="*/*"),),
    errors=(404,),
    public=True,
)
async def shared_file(request: Request) -> Response:
    share = await _share(request)
    mgr = manager(request)
    repo = mgr.checkpoint_repo(share.user_id, share.conversation_id)
    rel = str(request.path_params["path"])
    try:
        size, body = await mgr.checkpoints.shared_file(repo, share, rel)
    except (CheckpointNotFound, GitError) as exc:
        raise ApiError(404, f"No file {rel!r} in this share.") from exc
    filename = rel.rsplit("/", 1)[-1]
    return StreamingResponse(
        body,
        media_type=download_media_type(mimetypes.guess_type(filename)[0]),
        headers={
            "Content-Length": str(size),
            "Content-Disposition": attachment_header(filename),
            **DOWNLOAD_HEADERS,
            "Cache-Control": "no-store",
        },
    )


routes = [
    Route("/api/shared/{token}", shared_view, methods=["GET"]),
    Route("/api/shared/{token}/files/{path:anypath}", shared_file, methods=["GET"]),
]
