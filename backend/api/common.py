"""Small request helpers shared by the route modules."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import ClientDisconnect, Request

from backend.api.errors import ApiError

if TYPE_CHECKING:
    from backend.runs import RunManager
    from backend.store.repo import Store
    from backend.store.shapes import ConversationDetail

MAX_BODY = 1024 * 1024
MAX_DEPTH = 64  # nesting of arrays/objects in a JSON body
MAX_DIGITS = 40  # digits of one JSON number
# ids are uuid4 hex; anything longer or with other characters cannot exist
_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
_SEQ = re.compile(r"[0-9]{1,18}")
MAX_SEQ = 2**31 - 1  # the seq column is a 32-bit INTEGER: no message is after this


M = TypeVar("M", bound=BaseModel)


class _BadJSON(ValueError):
    pass


def user_id(request: Request) -> str:
    return str(request.state.user_id)


def manager(request: Request) -> RunManager:
    found: RunManager = request.app.state.manager
    return found


def store(request: Request) -> Store:
    found: Store = request.app.state.store
    return found


async def read_json(request: Request) -> dict[str, Any]:
    """The body of a JSON route as an object. A non-empty body must be declared
    `Content-Type: application/json` (415 otherwise: what stops a cross-site "simple"
    request); an empty body needs no type and reads as `{}` (bodiless POSTs). Malformed,
    too deep, too large or unencodable input is a 4xx, never a 5xx."""
    declared = request.headers.get("content-length", "")
    if declared.isascii() and declared.isdigit() and int(declared[:20]) > MAX_BODY:
        raise ApiError(413, f"Request body is larger than {MAX_BODY} bytes.")
    body = bytearray()
    try:
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_BODY:
                raise ApiError(413, f"Request body is larger than {MAX_BODY} bytes.")
    except ClientDisconnect as exc:  # the answer goes nowhere; do not log a crash
        raise ApiError(400, "The client went away while sending the body.") from exc
    if not body:
        return {}
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type != "application/json":
        raise ApiError(
            415,
            "Send the body as JSON with 'Content-Type: application/json' "
            f"(got {media_type[:80] or 'no content type'!r}).",
        )
    try:
        data = json.loads(
            body, parse_int=_parse_int, parse_constant=_no_constant, parse_float=_parse_float
        )
    except RecursionError as exc:
        raise ApiError(400, f"Body is nested deeper than {MAX_DEPTH} levels.") from exc
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError, _BadJSON
        raise ApiError(400, f"Body is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ApiError(400, "Body must be a JSON object.")
    _check_values(data)
    return data


async def read_model(request: Request, model: type[M], *, optional: bool = False) -> M:
    """The JSON body validated with the route's body model (the one its OpenAPI entry
    declares): a field of the wrong type or value is a 400 naming the field. ``optional``:
    a request without a body at all reads as ``{}``."""
    if optional and _no_body(request):
        data: dict[str, Any] = {}
    else:
        data = await read_json(request)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ApiError(400, validation_message(exc)) from exc


def _no_body(request: Request) -> bool:
    declared = request.headers.get("content-length")
    return declared == "0" or (declared is None and "transfer-encoding" not in request.headers)


def validation_message(exc: ValidationError) -> str:
    """The first problem pydantic found, in plain words, naming the field."""
    first = exc.errors(include_url=False, include_input=False)[0]
    where = ".".join(str(part) for part in first["loc"])
    message = str(first["msg"]).rstrip(".")
    return f"'{where}': {message}." if where else f"{message}."


def _parse_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_DIGITS:
        raise _BadJSON(f"a number has more than {MAX_DIGITS} digits")
    return int(text)


def _parse_float(text: str) -> float:
    if len(text) > MAX_DIGITS * 2:
        raise _BadJSON(f"a number has more than {MAX_DIGITS * 2} characters")
    return float(text)


def _no_constant(text: str) -> Any:
    raise _BadJSON(f"{text} is not JSON")


def _check_values(data: Any) -> None:
    """Every string (keys too) must be storable text: no lone UTF-16 surrogate (it cannot
    be encoded as UTF-8) and no NUL (PostgreSQL text refuses it); nesting is bounded."""
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ApiError(400, f"Body is nested deeper than {MAX_DEPTH} levels.")
        if isinstance(value, dict):
            for key, item in value.items():
                _check_text(key)
                stack.append((item, depth + 1))
        elif isinstance(value, list):
            stack.extend((item, depth + 1) for item in value)
        elif isinstance(value, str):
            _check_text(value)


def _check_text(text: str) -> None:
    if "\x00" in text:
        raise ApiError(400, "Body has a NUL character (\\u0000) in a string.")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ApiError(
            400, "Body has an invalid character in a string (a lone UTF-16 surrogate)."
        ) from exc


def is_id(value: str) -> bool:
    return _ID.fullmatch(value) is not None


def ident(request: Request, name: str, what: str) -> str:
    """A path id, or 404 without touching the store when it cannot be one of ours."""
    value = str(request.path_params[name])
    if not _ID.fullmatch(value):
        raise ApiError(404, f"No {what} {value[:80]!r}.")
    return value


def seq_param(raw: str | None, name: str) -> int:
    """A message seq from a query parameter or header: 1-18 ASCII digits, else 400; values
    past the column's range mean "after every message" (a database would refuse them)."""
    if raw is None or raw == "":
        return 0
    text = raw.strip()
    if not _SEQ.fullmatch(text):
        raise ApiError(400, f"{name} must be a non-negative integer seq of at most 18 digits.")
    return min(int(text), MAX_SEQ)


async def conversation_or_404(request: Request, cid: str) -> ConversationDetail:
    if not _ID.fullmatch(cid):
        raise ApiError(404, f"No conversation {cid[:80]!r}.")
    conv = await store(request).get_conversation(user_id(request), cid)
    if conv is None:
        raise ApiError(404, f"No conversation {cid!r}.")
    return conv
