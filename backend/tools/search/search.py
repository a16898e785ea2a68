"""web_search: a query to a configured provider, at most SEARCH_MAX results back.

Every failure (timeout, refusal, rate limit, garbage) is a failure result in plain words;
nothing raises out of :meth:`WebSearch.__call__`.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import ssl
from dataclasses import dataclass
from typing import Any

import httpx

from backend.tools.search import providers
from backend.tools.search.result import ToolResult

log = logging.getLogger(__name__)

PROVIDERS = ("searxng", "ddgs", "tavily", "brave")
MAX_QUERY_CHARS = 500
MAX_TITLE_CHARS = 300
MAX_SNIPPET_CHARS = 600


@dataclass(frozen=True)
class SearchConfig:
    provider: str | None = None
    url: str | None = None
    api_key: str | None = None
    max_results: int = 8
    timeout: float = 20.0

    @classmethod
    def from_settings(cls, settings: Any) -> SearchConfig:
        return cls(
            provider=settings.search_provider,
            url=settings.search_url,
            api_key=settings.search_api_key,
            max_results=settings.search_max,
            timeout=settings.web_timeout,
        )

    def problem(self) -> str | None:
        """Why web_search cannot be offered with this configuration (None: it can)."""
        if not self.provider:
            return "SEARCH_PROVIDER is not set"
        if self.provider not in PROVIDERS:
            return f"SEARCH_PROVIDER={self.provider!r} is not one of {', '.join(PROVIDERS)}"
        if self.provider == "searxng" and not self.url:
            return "SEARCH_PROVIDER=searxng needs SEARCH_URL (the SearXNG base URL)"
        if self.provider in ("tavily", "brave") and not self.api_key:
            return f"SEARCH_PROVIDER={self.provider} needs SEARCH_API_KEY"
        return None

    @property
    def offered(self) -> bool:
        return self.problem() is None

    @property
    def provider_label(self) -> str:
        return {
            "searxng": "SearXNG",
            "ddgs": "DuckDuckGo search (ddgs)",
            "tavily": "Tavily",
            "brave": "Brave",
        }.get(self.provider or "", str(self.provider))


def _clean(value: Any, cap: int) -> str:
    text = " ".join(str(value).split()) if isinstance(value, str) else ""
    return text if len(text) <= cap else text[: cap - 1].rstrip() + "…"


def _tidy(hits: list[dict[str, Any]], limit: int) -> list[dict[str, str]]:
    """Hits with an http(s) URL, duplicates out, at most ``limit``."""
    out: list[dict[str, str]] = []
    seen: set[str] = set()
    for hit in hits:
        url = hit.get("url")
        if not isinstance(url, str):
            continue
        url = url.strip()
        if not url.lower().startswith(("http://", "https://")) or url in seen:
            continue
        seen.add(url)
        title = _clean(hit.get("title"), MAX_TITLE_CHARS) or url
        out.append(
            {"title": title, "url": url, "snippet": _clean(hit.get("snippet"), MAX_SNIPPET_CHARS)}
        )
        if len(out) >= limit:
            break
    return out


def format_results(query: str, results: list[dict[str, str]]) -> str:
    if not results:
        return f"No results for {query!r}."
    lines = [f"Search results for {query!r}:"]
    for n, r in enumerate(results, 1):
        lines.append(f"{n}. {r['title']}\n   {r['url']}")
        if r["snippet"]:
            lines.append(f"   {r['snippet']}")
    return "\n".join(lines)


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """One TLS context for every search (building one loads the CA bundle: ~100 ms)."""
    return httpx.create_ssl_context()


class WebSearch:
    """``await WebSearch(config)(query)`` -> ToolResult with data ``{"query", "provider",
    "results": [{"title", "url", "snippet"}]}``. Pass ``client`` to reuse connections."""

    def __init__(self, config: SearchConfig, client: httpx.AsyncClient | None = None) -> None:
        self.config = config
        self._client = client

    async def __call__(self, query: str) -> ToolResult:
        query = " ".join((query or "").split())
        data: dict[str, Any] = {"query": query, "provider": self.config.provider, "results": []}
        problem = self.config.problem()
        if problem:
            return ToolResult.failure(f"Web search is not configured: {problem}.", **data)
        if not query:
            return ToolResult.failure("The search query is empty: give `query` some words.", **data)
        if len(query) > MAX_QUERY_CHARS:
            return ToolResult.failure(
                f"The search query is {len(query)} characters long; keep it under "
                f"{MAX_QUERY_CHARS}.",
                **data,
            )
        try:
            async with asyncio.timeout(self.config.timeout):
                hits = await self._search(query)
        except providers.ProviderError as exc:
            return ToolResult.failure(f"Web search failed: {exc}", **data)
        except TimeoutError:
            return ToolResult.failure(
                f"Web search failed: {self.config.provider_label} did not answer within "
                f"{self.config.timeout:g} s.",
                **data,
            )
        except Exception as exc:  # a provider library's surprise must not crash the run
            log.warning("web search via %s failed", self.config.provider, exc_info=True)
            return ToolResult.failure(
                f"Web search failed: {self.config.provider_label} raised {type(exc).__name__}.",
                **data,
            )
        results = _tidy(hits, self.config.max_results)
        if hits and not results:
            return ToolResult.failure(
                f"Web search failed: {self.config.provider_label} answered results without "
                "usable links.",
                **data,
            )
        data["results"] = results
        return ToolResult("success", format_results(query, results), data)

    async def _search(self, query: str) -> list[dict[str, Any]]:
        cfg = self.config
        limit = cfg.max_results
        if cfg.provider == "ddgs":
            return await providers.ddgs(query, limit, cfg.timeout)
        if self._client is not None:
            return await self._http(self._client, query, limit)
        async with httpx.AsyncClient(
            timeout=cfg.timeout, follow_redirects=True, verify=_ssl_context()
        ) as client:
            return await self._http(client, query, limit)

    async def _http(
        self, client: httpx.AsyncClient, query: str, limit: int
    ) -> list[dict[str, Any]]:
        cfg = self.config
        if cfg.provider == "searxng":
            return await providers.searxng(client, cfg.url or "", query, limit)
        if cfg.provider == "tavily":
            return await providers.tavily(client, cfg.url, cfg.api_key or "", query, limit)
        return await providers.brave(client, cfg.url, cfg.api_key or "", query, limit)


def offered(settings: Any) -> bool:
    """Whether web_search is offered to the model under these settings."""
    return SearchConfig.from_settings(settings).offered


async def web_search(query: str, settings: Any) -> ToolResult:
    return await WebSearch(SearchConfig.from_settings(settings))(query)
