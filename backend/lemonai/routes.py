"""The LemonAI client's HTTP API, served under /lemonai (docs/lemonai.md)."""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path, PurePosixPath
from typing import Any

from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.applications import Starlette
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from backend.api.common import read_json as api_read_json
from backend.api.errors import ApiError
from backend.api.files import file_response
from backend.api.names import TitleError, clean_title, title_from_text
from backend.api.uploads import upload_form
from backend.lemonai.auth import STATE_KEY, LemonAuth
from backend.lemonai.envelope import LemonError, http_error_handler, lemon_error_handler, ok
from backend.lemonai.services import (
    ConflictError,
    NotFoundError,
    RestoringError,
    Services,
    UploadError,
)
from backend.lemonai.stream import LemonStream, encode, lemon_events, message_token, mode_token
from backend.lemonai.translate import conversation, lemon_mode, translate_all
from backend.messages.kinds import MessageKind
from backend.messages.message import Message
from backend.runtime.paths import SANDBOX_ROOT
from backend.store.shapes import ConversationDetail

log = logging.getLogger(__name__)

GOAL_LIMIT = 100_000
MAX_BODY = 1024 * 1024
PING_SECONDS = 15.0
AGENT_ID = 1
WORKSPACE_PREFIX = "Conversation_"

Handler = Callable[[Request], Awaitable[Response]]


# -- helpers ------------------------------------------------------------------------------
def services(request: Request) -> Services:
    svc: Services = request.app.state.lemon
    return svc


def user(request: Request) -> str:
    return str(request.scope["state"][STATE_KEY])


async def read_json(request: Request) -> dict[str, Any]:
    """planact's strict JSON reader (sizes, nesting, surrogates, content type), with its
    errors in LemonAI's envelope."""
    try:
        return await api_read_json(request)
    except ApiError as exc:
        raise LemonError(exc.status, exc.message) from exc


def string_field(body: dict[str, Any], name: str, *, required: bool = False) -> str | None:
    value = body.get(name)
    if value is None or value == "":
        if required:
            raise LemonError(400, f"'{name}' is required.")
        return None
    if not isinstance(value, str):
        raise LemonError(400, f"'{name}' must be a string.")
    return value


async def conversation_or_404(request: Request, cid: str) -> ConversationDetail:
    conv = await services(request).get_conversation(user(request), cid)
    if conv is None:
        raise LemonError(404, f"No conversation {cid!r}.")
    return conv


def path_mapper(workspace: Path) -> Callable[[str], str]:
    """Workspace-relative paths as the absolute server paths LemonAI shows and sends back."""

    def to_abs(path: str) -> str:
        posix = PurePosixPath(path)
        if posix.is_absolute():
            if posix == SANDBOX_ROOT or SANDBOX_ROOT in posix.parents:
                return str(workspace.joinpath(*posix.relative_to(SANDBOX_ROOT).parts))
            return path
        return str(workspace / path)

    return to_abs


def agent_row() -> dict[str, Any]:
    return {
        "id": AGENT_ID,
        "name": "planact",
        "describe": "planact plans the goal as tasks and runs them in a sandbox.",
        "mcp_server_ids": [],
        "is_public": False,
        "knowledge_count": 0,
        "recommend": 0,
        "create_at": "1970-01-01T00:00:00Z",
        "update_at": "1970-01-01T00:00:00Z",
    }


# -- conversations ------------------------------------------------------------------------
async def list_conversations(request: Request) -> Response:
    rows = await services(request).list_conversations(user(request))
    return ok([conversation(c, AGENT_ID) for c in rows])


async def create_conversation(request: Request) -> Response:
    body = await read_json(request)
    content = string_field(body, "content") or ""
    title = title_from_text(content, 80) or "New conversation"
    cid = await services(request).create_conversation(user(request), title)
    return ok(conversation(await conversation_or_404(request, cid), AGENT_ID))


async def get_conversation(request: Request) -> Response:
    conv = await conversation_or_404(request, request.path_params["cid"])
    return ok(conversation(conv, AGENT_ID))


async def update_conversation(request: Request) -> Response:
    cid = request.path_params["cid"]
    body = await read_json(request)
    await conversation_or_404(request, cid)
    raw = body.get("title")
    if isinstance(raw, str) and not raw.strip():
        raw = None  # "" asks for an automatic title: the goal already is one
    if raw is not None:
        try:
            title = clean_title(raw)  # the rule planact's own rename applies
        except TitleError as exc:
            raise LemonError(400, str(exc)) from exc
        await services(request).rename_conversation(user(request), cid, title)
    return ok(conversation(await conversation_or_404(request, cid), AGENT_ID))


async def delete_conversation(request: Request) -> Response:
    cid = request.path_params["cid"]
    await conversation_or_404(request, cid)
    if not await services(request).delete_conversation(user(request), cid):
        raise LemonError(404, f"No conversation {cid!r}.")
    return ok({"conversation_id": cid, "deleted": True})


async def create_twins(request: Request) -> Response:
    """Twins mode runs a chat answer beside the agent: in its own planact conversation."""
    body = await read_json(request)
    cid = string_field(body, "conversation_id", required=True) or ""
    conv = await conversation_or_404(request, cid)
    twin = await services(request).create_conversation(user(request), f"Chat: {conv.title or cid}")
    return ok(conversation(await conversation_or_404(request, twin), AGENT_ID))


async def twins_tokens(request: Request) -> Response:
    row = conversation(await conversation_or_404(request, request.path_params["cid"]), AGENT_ID)
    total = row["input_tokens"] + row["output_tokens"]
    return ok(
        {"input_tokens": row["input_tokens"], "output_tokens": row["output_tokens"], "total": total}
    )


async def message_list(request: Request) -> Response:
    cid = request.query_params.get("conversation_id", "")
    if not cid:
        raise LemonError(400, "'conversation_id' is required.")
    await conversation_or_404(request, cid)
    svc = services(request)
    msgs = await svc.messages(cid)
    return ok(
        translate_all(msgs, path_mapper(svc.workspace(user(request), cid)), svc.manager.actions)
    )


# -- runs ---------------------------------------------------------------------------------
async def run(request: Request) -> Response:
    try:
        return await _run(request)
    except LemonError as exc:
        if "text/event-stream" not in request.headers.get("accept", ""):
            raise
        return sse_error(exc)


async def _run(request: Request) -> Response:
    body = await read_json(request)
    question = string_field(body, "question") or string_field(body, "goal")
    if not question or not question.strip():
        raise LemonError(400, "'question' is required: a non-empty string.")
    if len(question) > GOAL_LIMIT:
        raise LemonError(413, f"'question' is longer than {GOAL_LIMIT} characters.")
    mode = lemon_mode(body.get("mode"))
    if mode is None:
        raise LemonError(400, "'mode' must be one of twins, task, auto, chat.")
    cid = string_field(body, "conversation_id")
    file_ids = body.get("fileIds") or []
    if not isinstance(file_ids, list) or not all(isinstance(f, str) for f in file_ids):
        raise LemonError(400, "'fileIds' must be a list of upload ids.")
    svc = services(request)
    uid = user(request)
    model = _model(svc, body.get("model_id"))
    if file_ids:
        if cid is None:
            raise LemonError(400, "'fileIds' need a 'conversation_id'.")
        try:
            if await svc.active_run(uid, cid):
                raise ConflictError(cid)
            attached = await svc.attach_uploads(uid, cid, file_ids)
        except NotFoundError as exc:
            raise LemonError(404, f"No conversation or upload {exc}.") from exc
        except ConflictError as exc:
            raise LemonError(409, "A run is already active in this conversation.") from exc
        except UploadError as exc:
            raise LemonError(exc.status, exc.message) from exc
        log.info("attached %s to conversation %s", ", ".join(attached), cid)
    try:
        cid, rid = await svc.start_run(uid, question, cid, mode, model)
    except NotFoundError as exc:
        raise LemonError(404, f"No conversation {cid!r}.") from exc
    except RestoringError as exc:
        raise LemonError(
            409, "A rewind is putting this conversation's files back: retry in a moment."
        ) from exc
    except ConflictError as exc:
        raise LemonError(
            409, "A run is already active in this conversation: stop it or wait for it to end."
        ) from exc
    stream = LemonStream(mode, path_mapper(svc.workspace(uid, cid)), svc.manager.actions)
    return EventSourceResponse(
        _tokens(svc, stream, cid, rid),
        ping=PING_SECONDS,
        ping_message_factory=lambda: ServerSentEvent(comment="ping"),
        headers={
            "Cache-Control": "no-cache",
            "X-Accel-Buffering": "no",
            "X-Conversation-Id": cid,
            "X-Run-Id": rid,
        },
    )


def _model(svc: Services, model_id: object) -> str | None:
    """The model a `model_id` of /api/model/enabled names. The client keeps its last pick
    in localStorage, also across servers: an id this server does not list means the
    default model rather than a refused run."""
    names = svc.models()
    text = str(model_id) if isinstance(model_id, int | str) else ""
    index = int(text) - 1 if text.isdigit() else -1
    return names[index] if 0 <= index < len(names) else None


def _tokens(
    svc: Services, stream: LemonStream, cid: str, rid: str
) -> AsyncIterator[ServerSentEvent]:
    return lemon_events(svc.events(cid, rid), stream)


def sse_error(exc: LemonError) -> Response:
    """A refused run, in the stream's own encoding so that the client shows it."""
    msg = Message.build(MessageKind.ERROR, exc.msg, status="failure").to_dict()
    frames = [encode(mode_token("agent")), encode(message_token(msg))]
    body = b"".join(frame.encode() for frame in frames)
    return Response(body, status_code=exc.status, media_type="text/event-stream")


async def stop(request: Request) -> Response:
    body = await read_json(request)
    cid = string_field(body, "conversation_id", required=True) or ""
    svc = services(request)
    try:
        rid = await svc.active_run(user(request), cid)
    except NotFoundError as exc:
        raise LemonError(404, f"No conversation {cid!r}.") from exc
    if rid is None:
        return ok({"conversation_id": cid, "status": "done"})
    status = await svc.stop_run(rid)
    return ok({"conversation_id": cid, "run_id": rid, "status": status})


# -- files --------------------------------------------------------------------------------
async def read_file(request: Request) -> Response:
    body = await read_json(request)
    path = string_field(body, "path", required=True) or ""
    svc = services(request)
    uid = user(request)
    cid, rel = _locate(path, svc.user_root(uid), string_field(body, "conversation_id"))
    await conversation_or_404(request, cid)
    missing = LemonError(404, f"No file {path!r} in your conversations.")
    return await file_response(svc.workspace(uid, cid), rel, missing)


def _locate(path: str, user_root: Path, cid: str | None) -> tuple[str, str]:
    """(conversation id, workspace-relative path) for a path as the client got it."""
    missing = LemonError(404, f"No file {path!r} in your conversations.")
    if "\x00" in path:
        raise missing
    raw = path.strip()
    if not raw.startswith("/"):
        if not cid:
            raise LemonError(400, "A relative 'path' needs a 'conversation_id'.")
        return cid, raw
    try:
        parts = PurePosixPath(os.path.normpath(raw)).relative_to(PurePosixPath(user_root)).parts
    except ValueError as exc:
        raise missing from exc
    if len(parts) < 2 or not parts[0].startswith(WORKSPACE_PREFIX):
        raise missing
    return parts[0][len(WORKSPACE_PREFIX) :], "/".join(parts[1:])


async def upload(request: Request) -> Response:
    svc = services(request)
    if "multipart/form-data" not in request.headers.get("content-type", ""):
        raise LemonError(415, "Send files as multipart/form-data in 'files' fields.")
    try:
        # the body is counted as it arrives (chunked or not) and cut off past UPLOAD_MAX_MB
        async with upload_form(request, svc.upload_limit(), max_files=20) as form:
            items = form.getlist("files") + form.getlist("file")
            files = [f for f in items if isinstance(f, UploadFile)]
            if not files:
                raise LemonError(400, "No file: send one or more 'files' fields.")
            staged = await svc.stage_uploads(
                user(request), [(f.filename or "", f.file) for f in files]
            )
    except UploadError as exc:
        raise LemonError(exc.status, exc.message) from exc
    return ok(
        [
            {
                "id": s.id,
                "name": s.name,
                "filename": s.name,
                "filesize": s.size,
                "url": f"upload/{s.name}",
                "workspace_dir": "upload",
            }
            for s in staged
        ]
    )


# -- settings and the features planact does not have --------------------------------------
async def agents(_request: Request) -> Response:
    return ok([agent_row()])


async def agent(_request: Request) -> Response:
    return ok(agent_row())


async def generate_agent(request: Request) -> Response:
    await read_json(request)
    return ok(agent_row())


async def models(request: Request) -> Response:
    rows = [
        {
            "id": i + 1,
            "model_id": name,
            "model_name": name,
            "platform_id": 1,
            "platform_name": "planact",
            "is_subscribe": False,
            "requires_membership": False,
            "membership_level": None,
            "logo_url": "",
            "sort_weight": 0,
        }
        for i, name in enumerate(services(request).models())
    ]
    return ok(rows)


async def empty_list(_request: Request) -> Response:
    return ok([])


async def userinfo(request: Request) -> Response:
    uid = user(request)
    return ok(
        {"id": uid, "user_name": f"planact user {uid}", "email": "", "membership": {}, "points": {}}
    )


async def vscode_url(_request: Request) -> Response:
    return ok({"url": "", "vscode_url": ""})


async def not_found(request: Request) -> Response:
    raise LemonError(404, f"planact's LemonAI adapter has no route {request.url.path}.")


def create_lemonai_app(svc: Services) -> Starlette:
    routes = [
        Route("/api/conversation", list_conversations, methods=["GET"]),
        Route("/api/conversation", create_conversation, methods=["POST"]),
        Route("/api/conversation/twins", create_twins, methods=["POST"]),
        Route("/api/conversation/twins/tokens/{cid}", twins_tokens, methods=["GET"]),
        Route("/api/conversation/{cid}", get_conversation, methods=["GET"]),
        Route("/api/conversation/{cid}", update_conversation, methods=["PUT"]),
        Route("/api/conversation/{cid}", delete_conversation, methods=["DELETE"]),
        Route("/api/message/list", message_list, methods=["GET"]),
        Route("/api/agent/run", run, methods=["POST"]),
        Route("/api/agent/stop", stop, methods=["POST"]),
        Route("/api/agent/stop_chat", stop, methods=["POST"]),
        Route("/api/agent/coding/stop", stop, methods=["POST"]),
        Route("/api/agent/generate", generate_agent, methods=["POST"]),
        Route("/api/agent", agents, methods=["GET"]),
        Route("/api/agent/{id}", agent, methods=["GET"]),
        Route("/api/model/enabled", models, methods=["GET"]),
        Route("/api/mcp_server/active", empty_list, methods=["GET"]),
        Route("/api/mcp_server", empty_list, methods=["GET"]),
        Route("/api/knowledge/categories", empty_list, methods=["GET"]),
        Route("/api/knowledge", empty_list, methods=["GET"]),
        Route("/api/recharge_product/list", empty_list, methods=["GET"]),
        Route("/api/users/userinfo", userinfo, methods=["GET"]),
        Route("/api/runtime/vscode-url", vscode_url, methods=["GET"]),
        Route("/api/file/upload", upload, methods=["POST"]),
        Route("/api/file/read", read_file, methods=["POST"]),
        Route("/{rest:path}", not_found, methods=["GET", "POST", "PUT", "DELETE", "PATCH"]),
    ]
    app = Starlette(
        routes=routes,
        exception_handlers={LemonError: lemon_error_handler, HTTPException: http_error_handler},
    )
    app.state.lemon = svc
    app.add_middleware(LemonAuth, services=svc)
    return app
