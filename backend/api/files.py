"""Files of a conversation's workspace: list, one (attachment), all (zip)."""

from __future__ import annotations

import os
import tempfile
import zipfile
from pathlib import Path

import anyio
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Route

from backend.api.common import conversation_or_404, manager, user_id
from backend.api.errors import ApiError
from backend.api.names import attachment_header, zip_name
from backend.runtime.paths import PathEscapeError, resolve_in_workspace
from backend.workspace import file_entry, scan


async def list_files(request: Request) -> Response:
    cid = request.path_params["cid"]
    await conversation_or_404(request, cid)
    workspace = manager(request).workspace(user_id(request), cid)
    files = await anyio.to_thread.run_sync(scan, workspace)
    return JSONResponse([file_entry(cid, p, size) for p, (size, _m) in sorted(files.items())])


async def download(request: Request) -> Response:
    cid = request.path_params["cid"]
    await conversation_or_404(request, cid)
    workspace = manager(request).workspace(user_id(request), cid)
    rel = request.path_params["path"]
    try:
        real = resolve_in_workspace(workspace, rel)
    except PathEscapeError as exc:
        raise ApiError(404, f"No file {rel!r} in this conversation.") from exc
    if not workspace.is_dir() or not real.is_file():
        raise ApiError(404, f"No file {rel!r} in this conversation.")
    name = real.name
    return FileResponse(
        real,
        filename=name,
        content_disposition_type="attachment",
        headers={"X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"},
    )


async def download_zip(request: Request) -> Response:
    cid = request.path_params["cid"]
    conv = await conversation_or_404(request, cid)
    workspace = manager(request).workspace(user_id(request), cid)
    tmp = await anyio.to_thread.run_sync(_zip_workspace, workspace)
    name = zip_name(conv.get("title") or "", cid)  # issue 13: named after the title
    return FileResponse(
        tmp,
        media_type="application/zip",
        background=BackgroundTask(os.unlink, tmp),
        headers={"Content-Disposition": attachment_header(name)},
    )


def _zip_workspace(workspace: Path) -> str:
    fd, tmp = tempfile.mkstemp(suffix=".zip", prefix="planact-")
    os.close(fd)
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
        for rel in sorted(scan(workspace)):
            zf.write(workspace / rel, rel)
    return tmp


routes = [
    Route("/api/conversations/{cid}/files", list_files, methods=["GET"]),
    Route("/api/conversations/{cid}/files.zip", download_zip, methods=["GET"]),
    Route("/api/files/{cid}/{path:path}", download, methods=["GET"]),
]
