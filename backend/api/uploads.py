"""POST /api/conversations (an empty conversation) and POST /api/conversations/{id}/files
(input files, multipart)."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

import anyio
from starlette.datastructures import FormData, UploadFile
from starlette.formparsers import MultiPartException, MultiPartParser
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from backend.api.common import conversation_or_404, manager, read_json, store, user_id
from backend.api.errors import ApiError
from backend.uploads import (
    MB,
    UploadError,
    UploadLimits,
    check_workspace_room,
    save_upload,
    upload_path,
)
from backend.workspace import file_entry

TITLE_LIMIT = 200
MAX_FILES = 100


def clean_title(raw: Any) -> str:
    if not isinstance(raw, str):
        raise ApiError(400, "'title' must be a string.")
    title = " ".join(raw.split())
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in title):
        raise ApiError(400, "'title' may not contain control characters.")
    if len(title) > TITLE_LIMIT:
        raise ApiError(400, f"'title' is longer than {TITLE_LIMIT} characters.")
    return title


async def create_conversation(request: Request) -> Response:
    body = await read_json(request)
    title = clean_title(body.get("title", ""))
    cid = await store(request).create_conversation(user_id(request), title)
    return JSONResponse({"conversation_id": cid, "title": title}, 201)


def _limits(request: Request) -> UploadLimits:
    s = request.app.state.settings
    return UploadLimits.from_mb(s.upload_max_mb, s.workspace_max_mb)


class _TooLarge(MultiPartException):
    """Raised inside the parser (which then closes its temporary files)."""


async def _limited(request: Request, limit: int) -> AsyncGenerator[bytes, None]:
    seen = 0
    async for chunk in request.stream():
        seen += len(chunk)
        if seen > limit:
            raise _TooLarge(_too_large(limit))
        yield chunk


def _too_large(limit: int) -> str:
    return f"The upload is larger than {limit / MB:g} MB (UPLOAD_MAX_MB)."


async def upload_files(request: Request) -> Response:
    cid = request.path_params["cid"]
    conv = await conversation_or_404(request, cid)
    if any(r.get("status") == "running" for r in conv.get("runs", [])):
        raise ApiError(409, "A run is active in this conversation: upload when it has ended.")
    ctype = request.headers.get("content-type", "")
    if not ctype.lower().startswith("multipart/form-data"):
        raise ApiError(415, "Upload files as multipart/form-data (one or more 'file' fields).")
    limits = _limits(request)
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limits.upload_max_bytes:
        raise ApiError(413, _too_large(limits.upload_max_bytes))
    parser = MultiPartParser(
        request.headers,
        _limited(request, limits.upload_max_bytes),
        max_files=MAX_FILES,
        max_fields=20,
    )
    try:
        form = await parser.parse()
    except _TooLarge as exc:
        _close_spooled(parser)
        raise ApiError(413, exc.message) from exc
    except MultiPartException as exc:
        _close_spooled(parser)
        raise ApiError(400, f"The upload could not be read: {exc.message}") from exc
    except BaseException:
        _close_spooled(parser)
        raise
    try:
        # again, now that the body is in: a run may have started while it was being sent
        if await store(request).running_run_of(cid) is not None:
            raise ApiError(
                409,
                "A run started while the files were being sent: upload them again when it "
                "has ended.",
            )
        written = await _save_form(request, cid, form, limits)
    finally:
        await form.close()
        _close_spooled(parser)
    await store(request).record_uploads(cid, written)
    return JSONResponse([file_entry(cid, rel, size) for rel, size in written], 201)


def _close_spooled(parser: MultiPartParser) -> None:
    # a part cut off by the end of the body never reaches the form: close its file too
    for spooled in getattr(parser, "_files_to_close_on_error", []):
        spooled.close()


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
    written: list[tuple[str, int]] = []
    try:
        await anyio.to_thread.run_sync(check_workspace_room, workspace, sizes, limits)
        for rel, up in plan.items():
            size = await anyio.to_thread.run_sync(save_upload, workspace, rel, up.file)
            written.append((rel, size))
    except UploadError as exc:
        raise ApiError(exc.status, exc.message) from exc
    return written


def _name(directory: str, filename: str) -> str:
    try:
        return upload_path(directory, filename)
    except UploadError as exc:
        raise ApiError(exc.status, exc.message) from exc


routes = [
    Route("/api/conversations", create_conversation, methods=["POST"]),
    Route("/api/conversations/{cid}/files", upload_files, methods=["POST"]),
]
