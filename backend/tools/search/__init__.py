"""web_search: SearXNG, ddgs, Tavily or Brave behind one call that never raises."""

from backend.tools.search.result import ToolResult
from backend.tools.search.search import SearchConfig, WebSearch, format_results, offered, web_search

__all__ = ["SearchConfig", "ToolResult", "WebSearch", "format_results", "offered", "web_search"]
