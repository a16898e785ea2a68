"""Files of a conversation's workspace: list, one (attachment), all (zip).

Downloads and the zip (:mod:`backend.api.archive`) read every file through
:mod:`backend.runtime.confined`: opened beneath the workspace's descriptor without following a
symlink out, then streamed from that descriptor (a path swapped meanwhile cannot serve a file
from elsewhere).
"""

from __future__ import annotations

import mimetypes
import os
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
from starlette.convertors import Convertor, register_url_convertor
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from backend.api import archive
from backend.api.common import conversation_or_404, manager, user_id
from backend.api.errors import ApiError, error_response
from backend.api.headers import DOWNLOAD_HEADERS, download_media_type
from backend.api.models import FileEntry
from backend.api.names import attachment_header, zip_name
from backend.openapi import Param, Reply, operation
from backend.previews.pages import add_preview_urls
from backend.runtime import confined
from backend.runtime.paths import PathEscapeError
from backend.workspace import file_entry, scan


class AnyPathConvertor(Convertor[str]):
    """Like ``path``, but a name may hold any character, a newline included (``%0A``)."""

    regex = "(?s:.*)"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("anypath", AnyPathConvertor())


@operation(
    "A conversation's files",
    tag="files",
    replies=(Reply(200, "Every file in the workspace.", list[FileEntry]),),
    errors=(404,),
)
async def list_files(request: Request) -> Response:
    cid = request.path_params["cid"]
    await conversation_or_404(request, cid)
    workspace = manager(request).workspace(user_id(request), cid)
    files = await anyio.to_thread.run_sync(scan, workspace)
    entries = [file_entry(cid, p, size) for p, (size, _m) in sorted(files.items())]
    # previews: HTML pages open on the preview origin
    entries = await add_preview_urls(
        manager(request).tools.previews, user_id(request), cid, entries
    )
    return JSONResponse(entries)


@operation(
    "Download one file",
    tag="files",
    params=(Param("path", "path", "The file's path in the workspace (slashes and all)."),),
    replies=(
        Reply(
            200,
            "The file, `Content-Disposition: attachment`, typed by its name.",
            media_type="*/*",
        ),
    ),
    errors=(404,),
    description="A path outside the workspace is 404.",
)
async def download(request: Request) -> Response:
    cid = request.path_params["cid"]
    await conversation_or_404(request, cid)
    workspace = manager(request).workspace(user_id(request), cid)
    rel = request.path_params["path"]
    return await file_response(
        workspace, rel, ApiError(404, f"No file {rel!r} in this conversation.")
    )


async def file_response(workspace: Path, rel: str, missing: Exception) -> Response:
    """One workspace file as an attachment, streamed from a descriptor opened beneath the
    workspace (a path swapped meanwhile cannot lead outside); raises ``missing`` when there
    is no such regular file inside."""
    if not workspace.is_dir():
        raise missing
    try:
        fd, name = await anyio.to_thread.run_sync(confined.open_read, workspace, rel)
    except (PathEscapeError, OSError) as exc:
        raise missing from exc
    size = os.fstat(fd).st_size
    filename = name.rsplit("/", 1)[-1]
    return StreamingResponse(
        _stream(fd, size),
        media_type=download_media_type(mimetypes.guess_type(filename)[0]),
        headers={
            "Content-Length": str(size),
            "Content-Disposition": attachment_header(filename),
            **DOWNLOAD_HEADERS,  # a sandbox policy: opened from here, it runs no script
            "Cache-Control": "no-store",
        },
    )


async def _stream(fd: int, size: int) -> AsyncIterator[bytes]:
    """The file's first ``size`` bytes from its descriptor (closed at the end)."""
    try:
        left = size
        while left > 0:
            chunk = await anyio.to_thread.run_sync(os.read, fd, min(left, confined.CHUNK))
            if not chunk:
                break
            left -= len(chunk)
            yield chunk
    finally:
        os.close(fd)


@operation(
    "Download the workspace as a zip",
    tag="files",
    replies=(
        Reply(
            200,
            "The whole workspace, streamed.",
            media_type="application/zip",
        ),
    ),
    errors=(404, 413, 429),
    description="413: the workspace is over WORKSPACE_MAX_MB, counted by apparent size "
    "(before any byte is sent). 429: ZIP_MAX_CONCURRENT zips are already being made "
    "(with Retry-After).",
)
async def download_zip(request: Request) -> Response:
    """The workspace as a zip, streamed (backend/api/archive.py): 413 over WORKSPACE_MAX_MB
    counted by apparent size, 429 when ZIP_MAX_CONCURRENT zips are already running."""
    cid = request.path_params["cid"]
    conv = await conversation_or_404(request, cid)
    workspace = manager(request).workspace(user_id(request), cid)
    settings = request.app.state.settings
    slots = _zip_slots(request, settings.zip_max_concurrent)
    if not slots.take():
        response = error_response(
            429,
            f"{slots.limit} zips are being made already (ZIP_MAX_CONCURRENT): try again "
            "in a few seconds.",
            code="busy",
        )
        response.headers["Retry-After"] = str(archive.RETRY_AFTER_S)
        return response
    try:
        budget = int(settings.workspace_max_mb * archive.MB)
        files = await anyio.to_thread.run_sync(archive.plan, workspace, budget)
    except archive.TooLarge as exc:
        slots.give()
        raise ApiError(
            413,
            f"The workspace holds {exc.total / archive.MB:,.0f} MB (files counted at their "
            f"full size), over the {settings.workspace_max_mb:g} MB a zip may hold "
            "(WORKSPACE_MAX_MB): download the files one by one.",
        ) from exc
    except BaseException:
        slots.give()
        raise
    name = zip_name(conv.title, cid)  # named after the title
    headers = {
        "Content-Disposition": attachment_header(name),
        **DOWNLOAD_HEADERS,
        "Cache-Control": "no-store",
    }
    if request.method == "HEAD":  # the answer's head only: nothing is zipped for it
        slots.give()
        head = Response(media_type="application/zip", headers=headers)
        del head.headers["content-length"]  # a GET streams: its length is not known
        return head
    return archive.ZipResponse(archive.WorkspaceZip(workspace, files, budget), slots, headers)


def _zip_slots(request: Request, limit: int) -> archive.ZipSlots:
    """This app's zip slots, made on first use."""
    slots: archive.ZipSlots | None = getattr(request.app.state, "zip_slots", None)
    if slots is None:
        slots = request.app.state.zip_slots = archive.ZipSlots(limit)
    return slots


routes = [
    Route("/api/conversations/{cid}/files", list_files, methods=["GET"]),
    Route("/api/conversations/{cid}/files.zip", download_zip, methods=["GET"]),
    Route("/api/files/{cid}/{path:anypath}", download, methods=["GET"]),
]
