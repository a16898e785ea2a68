"""Small request helpers shared by the route modules."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from starlette.requests import Request

from backend.api.errors import ApiError

if TYPE_CHECKING:
    from backend.runs import RunManager
    from backend.store.repo import Store

MAX_BODY = 1024 * 1024


def user_id(request: Request) -> str:
    return str(request.state.user_id)


def manager(request: Request) -> RunManager:
    return request.app.state.manager


def store(request: Request) -> Store:
    return request.app.state.store


async def read_json(request: Request) -> dict[str, Any]:
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > MAX_BODY:
        raise ApiError(413, f"Request body is larger than {MAX_BODY} bytes.")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY:
            raise ApiError(413, f"Request body is larger than {MAX_BODY} bytes.")
    try:
        data = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ApiError(400, f"Body is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ApiError(400, "Body must be a JSON object.")
    return data


async def conversation_or_404(request: Request, cid: str) -> dict[str, Any]:
    conv = await store(request).get_conversation(user_id(request), cid)
    if conv is None:
        raise ApiError(404, f"No conversation {cid!r}.")
    return conv
