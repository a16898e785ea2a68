"""A conversation's checkpoints: list, compare, rewind, fork, share (docs/api.md "Every step
is a place to go back to"); the shared read-only view is backend/api/shared.py."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from backend.api.common import conversation_or_404, manager, read_model, seq_param, user_id
from backend.api.errors import ApiError
from backend.api.models import SEQ
from backend.checkpoints import CheckpointNotFound
from backend.checkpoints.gitrepo import GitError
from backend.openapi import Param, Reply, operation
from backend.store.base import iso
from backend.store.repo import ConflictError, RestoringError


class CheckpointOut(BaseModel):
    seq: int = Field(description="The seq of the action's result message (or the run's last).")
    run_id: str
    created_at: str | None
    label: str = Field(description="The action's label, or `end of run`.")
    files_changed: int = Field(description="Paths added, removed or changed since the last.")


class FileChange(BaseModel):
    path: str
    change: Literal["added", "removed", "changed"]
    kind: Literal["text", "binary", "link"]
    diff: str | None = Field(None, description="A unified diff (text files).")


class DiffOut(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    from_: int = Field(alias="from")
    to: int | None = Field(description="The later checkpoint's seq; null: the workspace now.")
    files: list[FileChange]


class SeqBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    seq: int = Field(ge=0, le=2**31 - 1, description="A checkpoint's seq.")


class Rewound(BaseModel):
    seq: int
    files: int = Field(description="Files (and links) in the workspace now.")


class Forked(BaseModel):
    conversation_id: str


class ShareLink(BaseModel):
    url: str = Field(description="The UI's read-only view of it.")
    token: str


class Revoked(BaseModel):
    revoked: int = Field(description="How many links of the conversation were revoked.")


def _seq(request: Request) -> int:
    raw = str(request.path_params["seq"])
    if not raw.isdigit() or len(raw) > 18:
        raise ApiError(404, f"No checkpoint at seq {raw[:40]!r}.")
    return int(raw)


@operation(
    "A conversation's checkpoints",
    tag="checkpoints",
    replies=(Reply(200, "Oldest first.", list[CheckpointOut]),),
    errors=(404,),
)
async def list_checkpoints(request: Request) -> Response:
    cid = request.path_params["cid"]
    await conversation_or_404(request, cid)
    rows = await manager(request).checkpoints.listed(cid)
    return JSONResponse(
        [
            CheckpointOut(
                seq=r.seq,
                run_id=r.run_id,
                created_at=iso(r.created_at),
                label=r.label,
                files_changed=r.files_changed,
            ).model_dump()
            for r in rows
        ]
    )


@operation(
    "Compare two checkpoints",
    tag="checkpoints",
    params=(
        Param(
            "to", description="The other checkpoint's seq (default: the workspace now).", schema=SEQ
        ),
    ),
    replies=(Reply(200, "Files added, removed or changed; unified diffs for text.", DiffOut),),
    errors=(404,),
    description="404: no such conversation, or no checkpoint at either seq.",
)
async def diff_checkpoints(request: Request) -> Response:
    cid = request.path_params["cid"]
    await conversation_or_404(request, cid)
    seq = _seq(request)
    raw_to = request.query_params.get("to")
    to = seq_param(raw_to, "'to'") if raw_to not in (None, "") else None
    mgr = manager(request)
    try:
        files = await mgr.checkpoints.diff(mgr.checkpoint_repo(user_id(request), cid), cid, seq, to)
    except CheckpointNotFound as exc:
        raise ApiError(404, str(exc)) from exc
    out = DiffOut(
        from_=seq,
        to=to,
        files=[FileChange(path=f.path, change=f.change, kind=f.kind, diff=f.diff) for f in files],
    )
    return JSONResponse(out.model_dump(by_alias=True))


@operation(
    "Rewind to a checkpoint",
    tag="checkpoints",
    body=SeqBody,
    replies=(
        Reply(200, "The workspace is as it was; later messages are out of the history.", Rewound),
    ),
    errors=(400, 404, 409, 413, 415),
    description="409: a run is active or waiting in it. 404: no such conversation or checkpoint.",
)
async def rewind(request: Request) -> Response:
    cid = request.path_params["cid"]
    await conversation_or_404(request, cid)
    body = await read_model(request, SeqBody)
    mgr, uid = manager(request), user_id(request)

    async def stop_previews() -> None:
        host = mgr.tools.previews
        if host is None:
            return
        for row in await host.rows(cid):
            if row.state in ("starting", "ready"):
                await host.stop(cid, row.name)

    try:
        files = await mgr.checkpoints.rewind(
            mgr.checkpoint_repo(uid, cid), cid, body.seq, stop_previews
        )
    except CheckpointNotFound as exc:
        raise ApiError(404, str(exc)) from exc
    except RestoringError as exc:
        raise ApiError(
            409, "Another rewind is putting this conversation's files back: retry in a moment."
        ) from exc
    except ConflictError as exc:
        raise ApiError(
            409, "A run is active or waiting in this conversation; stop it first."
        ) from exc
    except GitError as exc:
        raise ApiError(500, f"The workspace could not be restored: {exc}") from exc
    return JSONResponse(Rewound(seq=body.seq, files=files).model_dump())


@operation(
    "Fork at a checkpoint",
    tag="checkpoints",
    body=SeqBody,
    replies=(
        Reply(201, "A new conversation: the history up to there, that checkpoint's files.", Forked),
    ),
    errors=(400, 404, 413, 415),
)
async def fork(request: Request) -> Response:
    cid = request.path_params["cid"]
    conv = await conversation_or_404(request, cid)
    body = await read_model(request, SeqBody)
    mgr, uid = manager(request), user_id(request)
    try:
        new = await mgr.checkpoints.fork(
            uid,
            mgr.checkpoint_repo(uid, cid),
            cid,
            body.seq,
            conv.title,
            lambda new_cid: mgr.workspace(uid, new_cid),
        )
    except CheckpointNotFound as exc:
        raise ApiError(404, str(exc)) from exc
    return JSONResponse(Forked(conversation_id=new).model_dump(), status_code=201)


@operation(
    "Share a read-only link",
    tag="checkpoints",
    replies=(
        Reply(
            201, "A snapshot of the conversation as it is now, readable with no login.", ShareLink
        ),
    ),
    errors=(404,),
)
async def share(request: Request) -> Response:
    cid = request.path_params["cid"]
    conv = await conversation_or_404(request, cid)
    mgr, uid = manager(request), user_id(request)
    made = await mgr.checkpoints.share(mgr.checkpoint_repo(uid, cid), uid, cid, conv.title)
    link = ShareLink(url=f"/shared/{made.token}", token=made.token)
    return JSONResponse(link.model_dump(), status_code=201)


@operation(
    "Revoke the share links",
    tag="checkpoints",
    replies=(Reply(200, "Every link of the conversation is gone (404 after).", Revoked),),
    errors=(404,),
)
async def revoke(request: Request) -> Response:
    cid = request.path_params["cid"]
    await conversation_or_404(request, cid)
    mgr, uid = manager(request), user_id(request)
    count = await mgr.checkpoints.revoke(mgr.checkpoint_repo(uid, cid), cid)
    return JSONResponse(Revoked(revoked=count).model_dump())


routes = [
    Route("/api/conversations/{cid}/checkpoints", list_checkpoints, methods=["GET"]),
    Route("/api/conversations/{cid}/checkpoints/{seq}/diff", diff_checkpoints, methods=["GET"]),
    Route("/api/conversations/{cid}/rewind", rewind, methods=["POST"]),
    Route("/api/conversations/{cid}/fork", fork, methods=["POST"]),
    Route("/api/conversations/{cid}/share", share, methods=["POST"]),
    Route("/api/conversations/{cid}/share", revoke, methods=["DELETE"]),
]
