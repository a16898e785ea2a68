"""Files of a conversation's workspace: list, one (attachment), all (zip).

Downloads and the zip read every file through :mod:`backend.runtime.confined`: opened
beneath the workspace's descriptor without following a symlink out, then streamed from that
descriptor (a path swapped meanwhile cannot serve a file from elsewhere).
"""

from __future__ import annotations

import mimetypes
import os
import stat
import tempfile
import time
import zipfile
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
from starlette.background import BackgroundTask
from starlette.convertors import Convertor, register_url_convertor
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from backend.api.common import conversation_or_404, manager, user_id
from backend.api.errors import ApiError
from backend.api.headers import DOWNLOAD_HEADERS, download_media_type
from backend.api.names import attachment_header, zip_name
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


async def download_zip(request: Request) -> Response:
    cid = request.path_params["cid"]
    conv = await conversation_or_404(request, cid)
    workspace = manager(request).workspace(user_id(request), cid)
    tmp = await anyio.to_thread.run_sync(_zip_workspace, workspace)
    name = zip_name(conv.get("title") or "", cid)  # named after the title
    return FileResponse(
        tmp,
        media_type="application/zip",
        background=BackgroundTask(os.unlink, tmp),
        headers={"Content-Disposition": attachment_header(name), **DOWNLOAD_HEADERS},
    )


def _zip_workspace(workspace: Path) -> str:
    fd, tmp = tempfile.mkstemp(suffix=".zip", prefix="planact-")
    os.close(fd)
    try:
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
            for rel in sorted(scan(workspace)):
                _add(zf, workspace, rel)
    except BaseException:
        os.unlink(tmp)
        raise
    return tmp


def _add(zf: zipfile.ZipFile, workspace: Path, rel: str) -> None:
    try:
        fd, _name = confined.open_read(workspace, rel)
    except (PathEscapeError, OSError):
        return  # gone or swapped since the scan: left out
    with open(fd, "rb", closefd=True) as src:
        st = os.fstat(src.fileno())
        info = zipfile.ZipInfo(rel, time.localtime(max(st.st_mtime, 315532800))[:6])
        info.compress_type = zipfile.ZIP_DEFLATED
        info.external_attr = (stat.S_IFREG | stat.S_IMODE(st.st_mode)) << 16
        info.file_size = st.st_size
        with zf.open(info, "w", force_zip64=st.st_size > 1 << 30) as dst:
            while chunk := src.read(confined.CHUNK):
                dst.write(chunk)


routes = [
    Route("/api/conversations/{cid}/files", list_files, methods=["GET"]),
    Route("/api/conversations/{cid}/files.zip", download_zip, methods=["GET"]),
    Route("/api/files/{cid}/{path:anypath}", download, methods=["GET"]),
]
