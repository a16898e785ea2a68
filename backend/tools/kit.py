"""Tools: what the tool actions (web_search, web_fetch, mcp_tool) are given by the process
that runs them, made once from its settings. ``None``: that tool is not offered here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from backend.tools.mcp import McpManager
from backend.tools.search import SearchConfig, WebSearch
from backend.tools.web import FetchConfig, WebFetch

if TYPE_CHECKING:
    from backend.previews.host import PreviewHost


@dataclass(frozen=True)
class Tools:
    search: WebSearch | None = None
    fetch: WebFetch | None = None
    mcp: McpManager | None = None
    previews: PreviewHost | None = None  # the services this process hosts (backend/previews)

    @classmethod
    def from_settings(cls, settings: Any, mcp: McpManager | None = None) -> Tools:
        """``mcp``: the process's manager when it has one already (the server's, shared
        with GET /api/mcp/servers); otherwise one is made when MCP_SERVERS_FILE is set
        (raises McpConfigError when that file is unusable)."""
        search_config = SearchConfig.from_settings(settings)
        fetch_config = FetchConfig.from_settings(settings)
        if mcp is None and settings.mcp_servers_file:
            mcp = McpManager.from_settings(settings)
        return cls(
            search=WebSearch(search_config) if search_config.offered else None,
            fetch=WebFetch(fetch_config) if fetch_config.enabled else None,
            mcp=mcp if mcp is not None and mcp.names else None,
        )

    async def aclose(self) -> None:
        if self.mcp is not None:
            await self.mcp.aclose()
        if self.previews is not None:
            await self.previews.close()
