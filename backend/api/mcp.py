"""GET /api/mcp/servers: each configured MCP server's state, tools, error and last
stderr lines. Listing starts the servers not yet started (lazy start, bounded by
MCP_START_TIMEOUT), so that every entry is ready, starting or failed."""

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
    await manager.start_all()
    return JSONResponse(manager.states())


routes = [Route("/api/mcp/servers", list_servers, methods=["GET"])]
