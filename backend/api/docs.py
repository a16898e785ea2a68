"""GET /api/openapi.json (the OpenAPI document of every /api route, built from the routes'
declarations) and GET /api/docs (Swagger UI, its assets served from the swagger-ui-py
package: no CDN)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import swagger_ui
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Route

from backend.actions.registry.wire import wire_schema
from backend.api.errors import ApiError
from backend.api.models import ID_PATTERN, ErrorBody
from backend.openapi import ApiInfo, Reply, build_document, operation

ASSETS = Path(swagger_ui.__file__).parent / "static"
# the files the page loads (nothing else of the package is served)
SERVED = {"swagger-ui.css", "swagger-ui-bundle.js", "favicon-32x32.png", "favicon-16x16.png"}

ID = {"type": "string", "pattern": ID_PATTERN}
ERROR_TEXT = {
    400: "Bad JSON or a bad field (also a Host not in ALLOWED_HOSTS).",
    401: "Missing or wrong token.",
    403: "A state-changing request from an origin not in ALLOWED_ORIGINS.",
    404: "Unknown id (also another user's).",
    409: "Conflict.",
    413: "Body, goal or upload too large.",
    415: "A JSON route called with another content type.",
    503: "Unavailable.",
}

PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>planact API</title>
<link rel="icon" type="image/png" href="/api/docs/assets/favicon-32x32.png">
<link rel="stylesheet" href="/api/docs/assets/swagger-ui.css">
</head>
<body>
<div id="swagger-ui"></div>
<script src="/api/docs/assets/swagger-ui-bundle.js"></script>
<script src="/api/docs/init.js"></script>
</body>
</html>
"""

# a file of its own: the UI's Content-Security-Policy runs no inline script
INIT = """window.ui = SwaggerUIBundle({
  url: "/api/openapi.json",
  dom_id: "#swagger-ui",
  deepLinking: true,
});
"""


def _version() -> str:
    try:
        return version("planact")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "0"


def openapi_document(request: Request) -> dict[str, Any]:
    """Built once per app, from the app's own routes."""
    cached: dict[str, Any] | None = getattr(request.app.state, "openapi", None)
    if cached is None:
        actions = request.app.state.manager.actions  # the process's: ACTION_MODULES' too
        info = ApiInfo(
            title="planact",
            version=_version(),
            description="A self-hosted agent service. The contract in words: docs/api.md.",
            error_model=ErrorBody,
            error_text=ERROR_TEXT,
            path_params={name: ID for name in ("cid", "run_id", "uuid")},
            # the message's schema is the web UI's (backend/messages/schema.py): meta.json
            # items are the payload models (MetaItem), which kind carries which MetaPayloads
            schemas={"Message": lambda: wire_schema(actions)},
        )
        cached = build_document(request.app.routes, info, strict=False)
        request.app.state.openapi = cached
    return cached


@operation(
    "This document",
    tag="operating",
    public=True,
    replies=(Reply(200, "OpenAPI 3.1.", schema={"type": "object"}),),
)
async def openapi_json(request: Request) -> Response:
    return JSONResponse(openapi_document(request))


@operation(
    "The API's documentation page",
    tag="operating",
    public=True,
    replies=(Reply(200, "Swagger UI.", media_type="text/html"),),
)
async def docs_page(_request: Request) -> Response:
    return Response(PAGE, media_type="text/html")


@operation(
    "The documentation page's script",
    tag="operating",
    public=True,
    replies=(Reply(200, "Starts Swagger UI.", media_type="text/javascript"),),
)
async def docs_init(_request: Request) -> Response:
    return Response(INIT, media_type="text/javascript")


@operation(
    "The documentation page's assets",
    tag="operating",
    public=True,
    replies=(Reply(200, "A Swagger UI file.", media_type="*/*"),),
    errors=(404,),
)
async def docs_asset(request: Request) -> Response:
    name = str(request.path_params["name"])
    if name not in SERVED:
        raise ApiError(404, f"No asset {name[:80]!r}.")
    return FileResponse(ASSETS / name)


routes = [
    Route("/api/openapi.json", openapi_json, methods=["GET"]),
    Route("/api/docs", docs_page, methods=["GET"]),
    Route("/api/docs/init.js", docs_init, methods=["GET"]),
    Route("/api/docs/assets/{name}", docs_asset, methods=["GET"]),
]
