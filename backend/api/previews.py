"""GET /api/conversations/{cid}/previews, POST …/previews/{name}/stop and …/restart
(docs/api.md "Previews")."""

from __future__ import annotations

from typing import Literal, cast

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from backend.api.common import conversation_or_404, manager
from backend.api.errors import ApiError
from backend.openapi import Reply, operation
from backend.previews.host import PreviewHost, ServiceRuntime
from backend.store.base import iso
from backend.store.rows import StoredPreview


class PreviewOut(BaseModel):
    """One preview of a conversation, as GET …/previews lists it."""

    name: str
    port: int
    path: str
    url: str
    state: Literal["starting", "ready", "stopped", "failed"]
    started_at: str | None
    log: list[str]


def host_of(request: Request) -> PreviewHost:
    host = manager(request).tools.previews
    if host is None:
        raise ApiError(404, "Previews are not offered here.")
    return host


async def preview_out(host: PreviewHost, row: StoredPreview) -> PreviewOut:
    row = await host.fresh(row)
    return PreviewOut(
        name=row.name,
        port=row.port,
        path=row.path,
        url=host.url(row),
        state=row.state,
        started_at=iso(row.started_at),
        log=host.log_of(row),
    )


@operation(
    "A conversation's previews",
    tag="previews",
    replies=(
        Reply(
            200,
            "Each service the agent previewed, with its state and last output.",
            list[PreviewOut],
        ),
    ),
    errors=(404,),
    description="404: no such conversation (or another user's), or previews are not offered.",
)
async def list_previews(request: Request) -> Response:
    cid = request.path_params["cid"]
    await conversation_or_404(request, cid)
    host = host_of(request)
    rows = await host.rows(cid)
    return JSONResponse([(await preview_out(host, r)).model_dump() for r in rows])


async def _named(request: Request) -> tuple[PreviewHost, StoredPreview]:
    cid, name = request.path_params["cid"], request.path_params["name"]
    await conversation_or_404(request, cid)
    host = host_of(request)
    for row in await host.rows(cid):
        if row.name == name:
            return host, row
    raise ApiError(404, f"No preview {name!r} in this conversation.")


@operation(
    "Stop a preview",
    tag="previews",
    replies=(Reply(200, "The preview, stopped.", PreviewOut),),
    errors=(404,),
)
async def stop_preview(request: Request) -> Response:
    host, row = await _named(request)
    await host.stop(row.conversation_id, row.name)
    return JSONResponse((await preview_out(host, await _again(request, row))).model_dump())


@operation(
    "Restart a preview",
    tag="previews",
    replies=(Reply(200, "The preview, started again (with a new URL).", PreviewOut),),
    errors=(404, 409),
    description="409: the preview's runtime cannot run services on this server.",
)
async def restart_preview(request: Request) -> Response:
    host, row = await _named(request)
    mgr = manager(request)
    runtime = mgr.runtime(row.runtime)
    if runtime is None or not hasattr(runtime, "start_service"):
        raise ApiError(409, f"The {row.runtime} runtime cannot run services here.")
    await host.start(
        cast(ServiceRuntime, runtime),
        mgr.workspace(row.user_id, row.conversation_id),
        name=row.name,
        port=row.port,
        path=row.path,
        command=row.command,
    )
    return JSONResponse((await preview_out(host, await _again(request, row))).model_dump())


async def _again(request: Request, row: StoredPreview) -> StoredPreview:
    for again in await host_of(request).rows(row.conversation_id):
        if again.name == row.name:
            return again
    raise ApiError(404, f"No preview {row.name!r} in this conversation.")


routes = [
    Route("/api/conversations/{cid}/previews", list_previews, methods=["GET"]),
    Route("/api/conversations/{cid}/previews/{name}/stop", stop_preview, methods=["POST"]),
    Route("/api/conversations/{cid}/previews/{name}/restart", restart_preview, methods=["POST"]),
]
