"""What a route declares about itself for the OpenAPI document: its body, parameters and
every answer, attached to the handler where the route is declared (:func:`operation`).

The body model given here is the one the handler validates with (``read_model`` in
backend/api/common.py), so the document and the code have one source."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from pydantic import BaseModel

F = TypeVar("F", bound=Callable[..., Any])
ATTRIBUTE = "__openapi__"


@dataclass(frozen=True)
class Param:
    """A query, path or header parameter (path parameters the route names are found
    without one: declare them only to describe them)."""

    name: str
    where: Literal["query", "path", "header"] = "query"
    description: str = ""
    schema: dict[str, Any] = field(default_factory=lambda: {"type": "string"})
    required: bool = False


@dataclass(frozen=True)
class Reply:
    """One answer: its status, what it means, and its body — a type pydantic can describe
    (a model, ``list[Model]``), a raw schema, or neither (bytes of ``media_type``: a file);
    ``events`` for an event stream (event name → the model of its ``data``)."""

    status: int
    description: str
    body: Any = None
    media_type: str = "application/json"
    schema: dict[str, Any] | None = None
    events: dict[str, type[BaseModel]] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    # OpenAPI links: name -> (operationId, {parameter: runtime expression}), e.g.
    # ("get_conversation_get", {"cid": "$response.body#/conversation_id"})
    links: dict[str, tuple[str, dict[str, str]]] = field(default_factory=dict)


@dataclass(frozen=True)
class Operation:
    summary: str
    tag: str
    replies: tuple[Reply, ...]
    errors: tuple[int, ...] = ()
    body: type[BaseModel] | None = None
    body_media_type: str = "application/json"
    body_schema: dict[str, Any] | None = None  # a body no model describes (multipart)
    body_required: bool = True
    params: tuple[Param, ...] = ()
    public: bool = False  # no token needed
    description: str = ""


def operation(
    summary: str,
    *,
    tag: str,
    replies: tuple[Reply, ...],
    errors: tuple[int, ...] = (),
    body: type[BaseModel] | None = None,
    body_media_type: str = "application/json",
    body_schema: dict[str, Any] | None = None,
    body_required: bool = True,
    params: tuple[Param, ...] = (),
    public: bool = False,
    description: str = "",
) -> Callable[[F], F]:
    """Attach the route's documentation to its handler."""
    op = Operation(
        summary=summary,
        tag=tag,
        replies=replies,
        errors=errors,
        body=body,
        body_media_type=body_media_type,
        body_schema=body_schema,
        body_required=body_required,
        params=params,
        public=public,
        description=description,
    )

    def attach(fn: F) -> F:
        setattr(fn, ATTRIBUTE, op)
        return fn

    return attach


def undocumented(fn: F) -> F:
    """A route left out of the document on purpose (the catch-all 404 of unknown paths)."""
    setattr(fn, ATTRIBUTE, None)
    return fn


def operation_of(endpoint: Callable[..., Any]) -> Operation | None:
    """The route's documentation; raises LookupError for a handler that declares none."""
    if not hasattr(endpoint, ATTRIBUTE):
        raise LookupError(f"{getattr(endpoint, '__qualname__', endpoint)!r} is not documented")
    found: Operation | None = getattr(endpoint, ATTRIBUTE)
    return found
