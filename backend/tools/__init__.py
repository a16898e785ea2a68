"""Actions that are not sandbox actions: web search, web pages, MCP servers."""
