"""Every answer a test client gets, checked against the server's OpenAPI document with
openapi-core: an httpx response hook (``check_responses``) for the e2e and ASGI clients.

An answer of a route the document does not know fails the request, as does a status, a
content type or a JSON body the document does not allow. A stream's events are checked by
:func:`check_events` (the hook does not read a stream: the test does)."""

from __future__ import annotations

import re
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
import jsonschema
from openapi_core import OpenAPI
from openapi_core.datatypes import RequestParameters
from openapi_core.templating.paths.exceptions import OperationNotFound, PathNotFound
from starlette.testclient import TestClient
from werkzeug.datastructures import Headers, ImmutableMultiDict

# what the hook goes on: an httpx client, or the ASGI test client (its own httpx)
Client = TypeVar("Client", httpx.Client, TestClient)

JSON = "application/json"
FILES = "/api/files/"


class _Request:
    def __init__(self, request: httpx.Request) -> None:
        self.host_url = f"{request.url.scheme}://{request.url.netloc.decode()}"
        self.path = _one_segment_file_path(request.url.path)
        self.method = request.method.lower()
        self.parameters = RequestParameters(
            query=ImmutableMultiDict(request.url.params.multi_items()),
            header=Headers(request.headers.multi_items()),
        )
        self.content_type = request.headers.get("content-type", "")
        self.body: bytes | None = None


def _one_segment_file_path(path: str) -> str:
    """``/api/files/{cid}/{path}``: a file's path is one parameter, slashes and all (an
    OpenAPI path parameter matches one segment, so its slashes are given escaped)."""
    if not path.startswith(FILES):
        return path
    cid, _, rest = path[len(FILES) :].partition("/")
    return f"{FILES}{cid}/{quote(rest, safe='')}"


class _Response:
    def __init__(self, response: httpx.Response, data: bytes) -> None:
        self.status_code = response.status_code
        self.content_type = response.headers.get("content-type", "")
        self.headers = Headers(response.headers.multi_items())
        self.data = data


class ResponseCheck:
    """Validates each answer against ``document``; ``checked`` records (method, path
    template, status) of each one it checked."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.document = document
        self.openapi = OpenAPI.from_dict(document)
        self.checked: list[tuple[str, str, int]] = []
        self._templates = [
            (re.compile("^" + re.sub(r"\\{[^}]+\\}", "[^/]+", re.escape(t)) + "$"), t)
            for t in document["paths"]
        ]

    def template(self, path: str) -> str:
        """The document's path template that ``path`` is an instance of (a file path of
        several segments included)."""
        for pattern, template in self._templates:
            if pattern.match(path):
                return str(template)
        if path.startswith("/api/files/"):
            return "/api/files/{cid}/{path}"
        return path

    def __call__(self, response: httpx.Response) -> None:
        if not response.request.url.path.startswith("/api/"):
            return
        ctype = response.headers.get("content-type", "")
        data = b": stream\n"  # a stream is read by the test, its events checked by check_events
        if not ctype.startswith("text/event-stream"):
            response.read()
            data = response.content
        request = _Request(response.request)
        try:
            self.openapi.validate_response(request, _Response(response, data))
        except (PathNotFound, OperationNotFound):
            # the catch-all answer for a path or method no route has
            if response.status_code in (404, 405) and ctype.startswith(JSON):
                return
            raise
        path = self.template(response.request.url.path)
        found = (response.request.method, path, response.status_code)
        self.checked.append(found)

    def install(self, client: Client) -> Client:
        client.event_hooks["response"] = [*client.event_hooks.get("response", []), self]
        return client


def check_events(
    document: dict[str, Any], path: str, method: str, events: list[tuple[str, Any]]
) -> None:
    """Each (event name, data) of a stream against the ``x-events`` of the route's
    ``text/event-stream`` answer."""
    reply = document["paths"][path][method.lower()]["responses"]["200"]
    described = reply["content"]["text/event-stream"]["schema"]["x-events"]
    for name, data in events:
        assert name in described, f"event {name!r} is not described"
        # `#/components/schemas/…` references resolve inside the schema given the components
        schema = {**described[name], "components": document["components"]}
        jsonschema.Draft202012Validator(schema).validate(data)
