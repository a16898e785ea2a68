"""The OpenAPI 3.1 document of every ``/api`` route, built from the routes' own
declarations (meta.py) and the pydantic models they validate with."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

from pydantic import BaseModel, TypeAdapter
from pydantic.json_schema import JsonSchemaMode
from starlette.routing import BaseRoute, Route

from backend.openapi.meta import Operation, Reply, operation_of

log = logging.getLogger(__name__)

REF = "#/components/schemas/{model}"
_PARAM = re.compile(r"{([^}:]+)(?::[^}]+)?}")
# methods that may carry the token as ?access_token= and need no allowed origin
READS = frozenset({"GET", "HEAD"})


@dataclass(frozen=True)
class ApiInfo:
    title: str
    version: str
    description: str
    error_model: type[BaseModel]
    error_text: dict[int, str]
    # the schema of a path parameter by its name, where a route describes none itself
    path_params: dict[str, dict[str, Any]] = field(default_factory=dict)
    # a model's JSON Schema as made by its own source, used instead of pydantic's wherever
    # the document names the model (by its name; the schema's ``$defs`` referenced as
    # ``#/$defs/<name>`` join the components): e.g. the Message's, with meta.json typed
    schemas: Mapping[str, Callable[[], dict[str, Any]]] = field(default_factory=dict)


class _Schemas:
    """Component schemas, gathered as types are described."""

    def __init__(self) -> None:
        self.components: dict[str, Any] = {}

    def of(self, tp: Any, mode: JsonSchemaMode) -> dict[str, Any]:
        schema = TypeAdapter(tp).json_schema(mode=mode, ref_template=REF)
        self.components.update(schema.pop("$defs", {}))
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            self.components[tp.__name__] = schema
            return {"$ref": REF.format(model=tp.__name__)}
        return schema


def api_path(path: str) -> str:
    """A Starlette path (``/api/files/{cid}/{path:anypath}``) as an OpenAPI one."""
    return _PARAM.sub(r"{\1}", path)


def build_document(
    routes: Sequence[BaseRoute], info: ApiInfo, *, strict: bool = True
) -> dict[str, Any]:
    """The document of every ``/api`` route. A route that declares nothing raises
    LookupError (``strict``, as the tests build it), or is left out with a warning (the
    server: its document never fails for one route)."""
    schemas = _Schemas()
    error_ref = schemas.of(info.error_model, "serialization")
    paths: dict[str, dict[str, Any]] = {}
    for route in routes:
        if not isinstance(route, Route) or not route.path.startswith("/api/"):
            continue
        try:
            op = operation_of(route.endpoint)
        except LookupError:
            if strict:
                raise
            log.warning("the OpenAPI document leaves out %s: it declares nothing", route.path)
            continue
        if op is None:
            continue
        for method in sorted((route.methods or set()) - {"HEAD"}):
            item = paths.setdefault(api_path(route.path), {})
            item[method.lower()] = _operation(route, method, op, schemas, error_ref, info)
    _given(schemas.components, info.schemas)
    return {
        "openapi": "3.1.0",
        "info": {"title": info.title, "version": info.version, "description": info.description},
        "paths": paths,
        "components": {
            "schemas": dict(sorted(schemas.components.items())),
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "AUTH_TOKEN or one of AUTH_TOKENS (when the server sets one).",
                },
                "accessToken": {
                    "type": "apiKey",
                    "in": "query",
                    "name": "access_token",
                    "description": "The same token as a query parameter: GET only "
                    "(downloads and streams, which cannot send a header).",
                },
            },
        },
    }


def _operation(
    route: Route,
    method: str,
    op: Operation,
    schemas: _Schemas,
    error_ref: dict[str, Any],
    info: ApiInfo,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "operationId": f"{route.endpoint.__name__}_{method.lower()}",
        "summary": op.summary,
        "tags": [op.tag],
    }
    if op.description:
        out["description"] = op.description
    params = _parameters(route, op, info)
    if params:
        out["parameters"] = params
    if op.body is not None or op.body_schema is not None:
        schema = schemas.of(op.body, "validation") if op.body else dict(op.body_schema or {})
        out["requestBody"] = {
            "required": op.body_required,
            "content": {op.body_media_type: {"schema": schema}},
        }
    responses: dict[str, Any] = {}
    for reply in op.replies:
        responses[str(reply.status)] = _reply(reply, schemas)
    errors = set(op.errors) | {400}  # a Host not in ALLOWED_HOSTS, on every route
    if not op.public:
        errors.add(401)
    if method not in READS:
        errors.add(403)  # a state-changing request from an origin not allowed
    for status in sorted(errors):
        responses[str(status)] = {
            "description": info.error_text.get(status) or HTTPStatus(status).phrase,
            "content": {"application/json": {"schema": error_ref}},
        }
    out["responses"] = responses
    if op.public:
        out["security"] = []
    else:
        out["security"] = [{"bearer": []}, *([{"accessToken": []}] if method in READS else [])]
    return out


def _parameters(route: Route, op: Operation, info: ApiInfo) -> list[dict[str, Any]]:
    declared = {(p.name, p.where): p for p in op.params}
    out: list[dict[str, Any]] = []
    for name in route.param_convertors:
        p = declared.pop((name, "path"), None)
        out.append(
            {
                "name": name,
                "in": "path",
                "required": True,
                "description": p.description if p else "",
                "schema": p.schema if p else info.path_params.get(name, {"type": "string"}),
            }
        )
    for p in declared.values():
        if p.where == "path":
            raise ValueError(f"{route.path} has no path parameter {p.name!r}")
        out.append(
            {
                "name": p.name,
                "in": p.where,
                "required": p.required,
                "description": p.description,
                "schema": p.schema,
            }
        )
    return out


def _given(components: dict[str, Any], given: Mapping[str, Callable[[], dict[str, Any]]]) -> None:
    """Put each given model's schema (and its definitions) in place of pydantic's, where the
    document names the model."""
    for name, make in given.items():
        if name not in components:
            continue
        schema = _to_components(make())
        defs: dict[str, Any] = schema.pop("$defs", {})
        components.update(defs)
        components[name] = schema


def _to_components(node: Any) -> Any:
    """``node`` with its ``#/$defs/`` references made component references."""
    if isinstance(node, dict):
        out = {key: _to_components(value) for key, value in node.items()}
        ref = out.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            out["$ref"] = REF.format(model=ref.removeprefix("#/$defs/"))
        return out
    if isinstance(node, list):
        return [_to_components(value) for value in node]
    return node


def _reply(reply: Reply, schemas: _Schemas) -> dict[str, Any]:
    out: dict[str, Any] = {"description": reply.description}
    if reply.headers:
        out["headers"] = {
            name: {"description": text, "schema": {"type": "string"}}
            for name, text in reply.headers.items()
        }
    if reply.links:
        out["links"] = {
            name: {"operationId": target, "parameters": params}
            for name, (target, params) in reply.links.items()
        }
    if reply.events is not None:
        out["content"] = {reply.media_type: {"schema": _events(reply.events, schemas)}}
    elif reply.body is not None:
        out["content"] = {reply.media_type: {"schema": schemas.of(reply.body, "serialization")}}
    elif reply.schema is not None:
        out["content"] = {reply.media_type: {"schema": reply.schema}}
    else:  # bytes of that type, no JSON schema describes them (OpenAPI 3.1: no schema)
        out["content"] = {reply.media_type: {}}
    return out


def _events(events: dict[str, type[BaseModel]], schemas: _Schemas) -> dict[str, Any]:
    """An event stream described event by event (``x-events``: each event's name and the
    schema of its ``data``, one JSON document on one line); the stream itself is text."""
    names = ", ".join(f"`{name}` ({model.__name__})" for name, model in events.items())
    return {
        "description": f"Server-sent events: {names}; `: ping` comment lines keep it open.",
        "x-events": {name: schemas.of(model, "serialization") for name, model in events.items()},
    }
