"""POST /api/conversations (an empty conversation) and POST /api/conversations/{id}/files
(input files, multipart); ``upload_form``, the body reader every upload route shares."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from starlette.datastructures import FormData, UploadFile
from starlette.formparsers import MultiPartException, MultiPartParser
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from backend.api import names
from backend.api.common import conversation_or_404, manager, read_model, store, user_id
from backend.api.errors import ApiError
from backend.api.models import ConversationCreated, FileEntry, NewConversationBody
from backend.openapi import Reply, operation
from backend.uploads import (
    MB,
    UploadError,
    UploadLimits,
    budget_locked,
    check_workspace_room,
    save_upload,
    upload_path,
)
from backend.workspace import file_entry

MAX_FILES = 100


def clean_title(raw: Any) -> str:
    """The shared title rule (backend/api/names.py) with its refusal as a JSON 400."""
    try:
        return names.clean_title(raw)
    except names.TitleError as exc:
        raise ApiError(400, str(exc)) from exc


@operation(
    "Create an empty conversation",
    tag="conversations",
    body=NewConversationBody,
    body_required=False,
    replies=(
        Reply(
            201,
            "Created (files can be uploaded before the first goal).",
            ConversationCreated,
            links={
                name: (target, {"cid": "$response.body#/conversation_id"})
                for name, target in (
                    ("Conversation", "get_conversation_get"),
                    ("Rename", "rename_conversation_patch"),
                    ("Messages", "conversation_messages_get"),
                    ("Upload", "upload_files_post"),
                    ("Files", "list_files_get"),
                    ("Zip", "download_zip_get"),
                    ("Delete", "delete_conversation_delete"),
                )
            },
        ),
    ),
    errors=(413, 415),
)
async def create_conversation(request: Request) -> Response:
    body = await read_model(request, NewConversationBody)
    title = clean_title(body.title)
    cid = await store(request).create_conversation(user_id(request), title)
    created = ConversationCreated(conversation_id=cid, title=title)
    return JSONResponse(created.model_dump(), 201)


def _limits(request: Request) -> UploadLimits:
    s = request.app.state.settings
    return UploadLimits.from_mb(s.upload_max_mb, s.workspace_max_mb)


class _TooLarge(MultiPartException):
    """Raised inside the parser (which then closes its temporary files)."""


async def _counted(request: Request, limit: int) -> AsyncGenerator[bytes, None]:
    """The body as it arrives, cut off as soon as it passes ``limit`` bytes: a chunked body
    (no Content-Length) is counted like any other, and nothing past the limit is read."""
    seen = 0
    async for chunk in request.stream():
        seen += len(chunk)
        if seen > limit:
            raise _TooLarge(too_large(limit))
        yield chunk


def too_large(limit: int) -> str:
    return f"The upload is larger than {limit / MB:g} MB (UPLOAD_MAX_MB)."


@asynccontextmanager
async def upload_form(
    request: Request, limit: int, *, max_files: int, max_fields: int = 20
) -> AsyncIterator[FormData]:
    """The multipart form of an upload request, read with at most ``limit`` bytes of body
    (UPLOAD_MAX_MB) whatever the transfer encoding; its spooled files are closed (so
    removed) on leaving, whatever happens. Raises UploadError: 413 over the limit, 400 a
    body that is not a readable multipart form."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise UploadError(413, too_large(limit))
    parser = MultiPartParser(
        request.headers, _counted(request, limit), max_files=max_files, max_fields=max_fields
    )
    try:
        try:
            form = await parser.parse()
        except _TooLarge as exc:
            raise UploadError(413, exc.message) from exc
        except MultiPartException as exc:
            raise UploadError(400, f"The upload could not be read: {exc.message}") from exc
        try:
            yield form
        finally:
            await form.close()
    finally:
        # a part cut off by the end of the body never reaches the form: close its file too
        for spooled in getattr(parser, "_files_to_close_on_error", []):
            spooled.close()


UPLOAD_FORM = {
    "type": "object",
    "properties": {
        "file": {
            "type": "array",
            "items": {"type": "string", "format": "binary"},
            "description": "One or more files.",
        },
        "dir": {"type": "string", "description": "A folder inside the workspace."},
    },
    "required": ["file"],
}


@operation(
    "Upload input files",
    tag="files",
    body_media_type="multipart/form-data",
    body_schema=UPLOAD_FORM,
    replies=(Reply(201, "The files written.", list[FileEntry]),),
    errors=(404, 409, 413, 415),
    description="413: over UPLOAD_MAX_MB or WORKSPACE_MAX_MB; 409: a run is active.",
)
async def upload_files(request: Request) -> Response:
    cid = request.path_params["cid"]
    conv = await conversation_or_404(request, cid)
    if any(r.status in ("running", "waiting") for r in conv.runs):
        raise ApiError(409, "A run is active in this conversation: upload when it has ended.")
    ctype = request.headers.get("content-type", "")
    if not ctype.lower().startswith("multipart/form-data"):
        raise ApiError(415, "Upload files as multipart/form-data (one or more 'file' fields).")
    limits = _limits(request)
    try:
        async with upload_form(request, limits.upload_max_bytes, max_files=MAX_FILES) as form:
            # again, now that the body is in: a run may have started while it was being sent
            if await store(request).running_run_of(cid) is not None:
                raise ApiError(
                    409,
                    "A run started while the files were being sent: upload them again when "
                    "it has ended.",
                )
            written = await _save_form(request, cid, form, limits)
    except UploadError as exc:
        raise ApiError(exc.status, exc.message) from exc
    await store(request).record_uploads(cid, written)
    return JSONResponse([file_entry(cid, rel, size) for rel, size in written], 201)


async def _save_form(
    request: Request, cid: str, form: FormData, limits: UploadLimits
) -> list[tuple[str, int]]:
    """Check every name and the workspace room first, then write: all or nothing refused."""
    directory = form.get("dir") or ""
    if not isinstance(directory, str):
        raise ApiError(400, "'dir' must be a text field (a folder inside the workspace).")
    uploads = [f for f in form.getlist("file") if isinstance(f, UploadFile)]
    if not uploads:
        raise ApiError(400, "No file: send one or more 'file' fields.")
    plan: dict[str, UploadFile] = {}
    for up in uploads:
        rel = _name(directory, up.filename or "")
        if rel in plan:
            raise ApiError(400, f"The file {rel!r} is given twice.")
        plan[rel] = up
    sizes = {rel: up.size or 0 for rel, up in plan.items()}
    workspace = manager(request).workspace(user_id(request), cid)

    def check_and_write() -> list[tuple[str, int]]:
        check_workspace_room(workspace, sizes, limits)
        return [(rel, save_upload(workspace, rel, up.file)) for rel, up in plan.items()]

    # under the workspace's budget lock: concurrent uploads cannot each find the room free
    return await budget_locked(workspace, check_and_write)


def _name(directory: str, filename: str) -> str:
    try:
        return upload_path(directory, filename)
    except UploadError as exc:
        raise ApiError(exc.status, exc.message) from exc


routes = [
    Route("/api/conversations", create_conversation, methods=["POST"]),
    Route("/api/conversations/{cid}/files", upload_files, methods=["POST"]),
]
