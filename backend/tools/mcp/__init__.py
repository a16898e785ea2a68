"""MCP servers as tools: the configured servers' tools listed to the model and called
through one manager (backend/tools/mcp/manager.py)."""

from backend.tools.mcp.config import McpConfigError, ServerSpec, load_servers, parse_servers
from backend.tools.mcp.manager import McpManager, McpTool, ToolListing
from backend.tools.mcp.results import McpResult

__all__ = [
    "McpConfigError",
    "McpManager",
    "McpResult",
    "McpTool",
    "ServerSpec",
    "ToolListing",
    "load_servers",
    "parse_servers",
]
