"""web_fetch: a URL's main content as Markdown, its title and links, inside a network policy."""

from backend.tools.search.result import ToolResult
from backend.tools.web.config import FetchConfig
from backend.tools.web.fetch import WebFetch, offered, web_fetch
from backend.tools.web.policy import NetworkPolicy, Refused, address_problem

__all__ = [
    "FetchConfig",
    "NetworkPolicy",
    "Refused",
    "ToolResult",
    "WebFetch",
    "address_problem",
    "offered",
    "web_fetch",
]
