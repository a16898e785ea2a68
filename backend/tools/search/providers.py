"""One function per search provider: query in, raw hits out, or a ProviderError in plain words.

Hits are ``{"title", "url", "snippet"}`` dicts; the caller cleans and caps them.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx

# a provider's answer larger than this is not a search result page
MAX_ANSWER_BYTES = 4_000_000

TAVILY_URL = "https://api.tavily.com"
BRAVE_URL = "https://api.search.brave.com"


class ProviderError(Exception):
    """The provider did not give results; the message says why, for the model."""


async def _get_json(
    client: httpx.AsyncClient,
    name: str,
    method: str,
    url: str,
    **kwargs: Any,
) -> Any:
    try:
        async with client.stream(method, url, **kwargs) as response:
            if response.status_code == 429:
                retry = response.headers.get("retry-after")
                after = f" (it asks to retry after {retry} s)" if retry else ""
                raise ProviderError(f"{name} refused the search: rate limited (HTTP 429){after}.")
            if response.status_code in (401, 403):
                raise ProviderError(
                    f"{name} refused the search (HTTP {response.status_code}): "
                    "check SEARCH_API_KEY."
                )
            if response.status_code >= 400:
                raise ProviderError(f"{name} answered HTTP {response.status_code}.")
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > MAX_ANSWER_BYTES:
                    raise ProviderError(f"{name} answered more than {MAX_ANSWER_BYTES} bytes.")
    except httpx.TimeoutException as exc:
        raise ProviderError(f"{name} did not answer in time.") from exc
    except httpx.HTTPError as exc:
        raise ProviderError(f"{name} could not be reached ({type(exc).__name__}).") from exc
    try:
        return json.loads(body)
    except ValueError as exc:
        raise ProviderError(f"{name} answered something that is not JSON.") from exc


def _list_at(payload: Any, *keys: str) -> list[Any]:
    for key in keys:
        if not isinstance(payload, dict):
            return []
        payload = payload.get(key)
    return payload if isinstance(payload, list) else []


def _shape_error(name: str) -> ProviderError:
    return ProviderError(f"{name} answered JSON without a list of search results.")


async def searxng(
    client: httpx.AsyncClient, base_url: str, query: str, limit: int
) -> list[dict[str, Any]]:
    url = base_url.rstrip("/") + "/search"
    payload = await _get_json(
        client,
        "SearXNG",
        "GET",
        url,
        params={"q": query, "format": "json"},
        headers={"Accept": "application/json"},
    )
    return _content_results(payload, "SearXNG")


async def tavily(
    client: httpx.AsyncClient, base_url: str | None, api_key: str, query: str, limit: int
) -> list[dict[str, Any]]:
    url = (base_url or TAVILY_URL).rstrip("/") + "/search"
    payload = await _get_json(
        client,
        "Tavily",
        "POST",
        url,
        json={"query": query, "max_results": limit},
        headers={"Authorization": f"Bearer {api_key}"},
    )
    return _content_results(payload, "Tavily")


async def brave(
    client: httpx.AsyncClient, base_url: str | None, api_key: str, query: str, limit: int
) -> list[dict[str, Any]]:
    url = (base_url or BRAVE_URL).rstrip("/") + "/res/v1/web/search"
    payload = await _get_json(
        client,
        "Brave",
        "GET",
        url,
        params={"q": query, "count": min(limit, 20)},
        headers={"Accept": "application/json", "X-Subscription-Token": api_key},
    )
    if not isinstance(payload, dict):
        raise _shape_error("Brave")
    if "web" not in payload:
        # an answer with no web section is a search without web results
        if payload.get("type") == "search":
            return []
        raise _shape_error("Brave")
    return [
        {"title": r.get("title"), "url": r.get("url"), "snippet": r.get("description")}
        for r in _list_at(payload, "web", "results")
        if isinstance(r, dict)
    ]


def _content_results(payload: Any, provider: str) -> list[dict[str, Any]]:
    """``{"results": [{"title", "url", "content"}]}``, the shape SearXNG and Tavily share."""
    if not isinstance(payload, dict) or not isinstance(payload.get("results"), list):
        raise _shape_error(provider)
    return [
        {"title": r.get("title"), "url": r.get("url"), "snippet": r.get("content")}
        for r in payload["results"]
        if isinstance(r, dict)
    ]


async def ddgs(query: str, limit: int, seconds: float) -> list[dict[str, Any]]:
    """The keyless metasearch of the ``ddgs`` package (synchronous: run in a thread)."""
    from ddgs import DDGS
    from ddgs.exceptions import DDGSException, RatelimitException, TimeoutException

    def run() -> list[dict[str, Any]]:
        return DDGS(timeout=max(1, int(seconds))).text(query, max_results=limit)

    try:
        hits = await asyncio.to_thread(run)
    except RatelimitException as exc:
        raise ProviderError("DuckDuckGo search (ddgs) refused the search: rate limited.") from exc
    except TimeoutException as exc:
        raise ProviderError("DuckDuckGo search (ddgs) did not answer in time.") from exc
    except DDGSException as exc:
        # ddgs says "No results found." also when every backend failed to answer
        raise ProviderError(f"DuckDuckGo search (ddgs) gave no results: {exc}") from exc
    if not isinstance(hits, list):
        raise _shape_error("DuckDuckGo search (ddgs)")
    return [
        {"title": r.get("title"), "url": r.get("href"), "snippet": r.get("body")}
        for r in hits
        if isinstance(r, dict)
    ]
