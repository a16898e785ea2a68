"""GET /api/mcp/servers: each configured MCP server's state, tools, error and last
stderr lines. Listing starts the servers not yet started (lazy start, bounded by
MCP_START_TIMEOUT), tries again the failed ones whose back-off is over and asks each
streamable HTTP server that looks ready whether it still answers, so that every entry says
how the server is now: ready, starting or failed (with why)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from backend.api.models import McpServerState
from backend.openapi import Reply, operation
from backend.tools.mcp import McpManager


@operation(
    "MCP servers",
    tag="tools",
    replies=(Reply(200, "Each configured server's state and tools.", list[McpServerState]),),
)
async def list_servers(request: Request) -> Response:
    manager: McpManager = request.app.state.mcp
    await manager.refresh()
    return JSONResponse(manager.states())


routes = [Route("/api/mcp/servers", list_servers, methods=["GET"])]
