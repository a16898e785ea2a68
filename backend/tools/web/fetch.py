"""web_fetch: a URL's main content as Markdown, its title and its links, inside the network policy.

Redirects are followed here (each hop checked, at most MAX_REDIRECTS, loops refused); every
connection goes through the guarded transport (DNS answers checked); the body is read up to
WEB_MAX_BYTES and the whole fetch is bounded by WEB_TIMEOUT. Nothing raises out of
:meth:`WebFetch.__call__`: every fault is a failure result in plain words.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from backend.tools.search.result import ToolResult
from backend.tools.web import extract
from backend.tools.web.config import FetchConfig
from backend.tools.web.policy import NetworkPolicy, Refused, guarded_client

log = logging.getLogger(__name__)

MAX_REDIRECTS = 5
MAX_CONTENT_CHARS = 60_000  # Markdown given to the model at most
USER_AGENT = "Mozilla/5.0 (compatible; planact web_fetch)"


@dataclass
class Response:
    url: str
    status: int
    reason: str
    content_type: str
    encoding: str | None
    body: bytes
    truncated: bool
    kind: str
    redirects: list[str] = field(default_factory=list)


class FetchError(Exception):
    """The fetch failed; the message is for the model."""


async def get(
    client: httpx.AsyncClient, policy: NetworkPolicy, url: str, max_bytes: int
) -> Response:
    """GET ``url`` following at most MAX_REDIRECTS checked redirects; the body capped."""
    seen: list[str] = []
    current = policy.check_url(url)
    while True:
        seen.append(str(current))
        request = client.build_request("GET", current, headers={"User-Agent": USER_AGENT})
        response = await client.send(request, stream=True)
        try:
            location = response.headers.get("location")
            if response.is_redirect and location:
                target = current.join(location)
                if str(target) in seen:
                    raise FetchError(
                        f"{url} redirects in a loop ({' -> '.join(seen)} -> {target})."
                    )
                if len(seen) > MAX_REDIRECTS:
                    raise FetchError(f"{url} redirects more than {MAX_REDIRECTS} times.")
                try:
                    current = policy.check_url(str(target))
                except Refused as exc:
                    raise Refused(f"{url} redirects to {target}: {exc}") from exc
                continue
            return await _read(response, str(current), seen[:-1], max_bytes)
        finally:
            await response.aclose()


async def _read(response: httpx.Response, url: str, redirects: list[str], cap: int) -> Response:
    ctype = response.headers.get("content-type", "")
    declared = ctype.split(";", 1)[0].strip().lower()
    # a type that is binary by its name is refused before its body is read
    body = bytearray()
    truncated = False
    if declared and extract.kind_of(declared, b"") == "binary":
        kind = "binary"
    else:
        async for chunk in response.aiter_bytes():
            room = cap - len(body)
            if len(chunk) > room:
                body += chunk[:room]
                truncated = True
                break
            body += chunk
        kind = extract.kind_of(ctype, bytes(body[:4096]))
    return Response(
        url=url,
        status=response.status_code,
        reason=response.reason_phrase,
        content_type=declared,
        encoding=response.charset_encoding,
        body=bytes(body),
        truncated=truncated,
        kind=kind,
        redirects=redirects,
    )


def _page_of(resp: Response) -> extract.Page:
    if resp.kind == "pdf":
        if resp.truncated:
            raise extract.Unreadable("the PDF is larger than WEB_MAX_BYTES, so it was not read")
        return extract.from_pdf(resp.body)
    text = extract.decode(resp.body, resp.encoding)
    if resp.kind == "html":
        return extract.from_html(text, resp.url)
    return extract.from_text(text)


def format_page(url: str, page: extract.Page, notes: list[str]) -> str:
    head = f"# {page.title}\n{url}" if page.title else url
    body = page.markdown or "(no readable text)"
    if len(body) > MAX_CONTENT_CHARS:
        body = body[:MAX_CONTENT_CHARS]
        notes = [*notes, f"the text was cut at {MAX_CONTENT_CHARS} characters"]
    lines = [head, ""]
    lines.extend(f"Note: {note}." for note in notes)
    if notes:
        lines.append("")
    lines.append(body)
    if page.links:
        shown = page.links[:30]
        lines.append("")
        lines.append(f"Links ({len(page.links)}{', first 30' if len(page.links) > 30 else ''}):")
        lines.extend(f"- [{link['text'] or link['url']}]({link['url']})" for link in shown)
    return "\n".join(lines)


class WebFetch:
    """``await WebFetch(config)(url, screenshot_dir=...)`` -> ToolResult whose data is
    ``{"url", "title", "markdown", "links": [{"url", "text"}], "kind", "status",
    "truncated", "rendered", "screenshot"?, "redirects"}``."""

    def __init__(self, config: FetchConfig, client: httpx.AsyncClient | None = None) -> None:
        self.config = config
        self.policy = NetworkPolicy(config.allow_hosts)
        self._client = client

    async def __call__(self, url: str, screenshot_dir: Path | None = None) -> ToolResult:
        url = (url or "").strip()
        data: dict[str, Any] = {"url": url}
        if not self.config.enabled:
            return ToolResult.failure("Web pages are turned off here (WEB_FETCH=0).", **data)
        if not url:
            return ToolResult.failure("The URL is empty: give `url` a http(s) address.", **data)
        try:
            async with asyncio.timeout(self.config.timeout):
                return await self._fetch(url, screenshot_dir)
        except Refused as exc:
            return ToolResult.failure(f"Refused: {exc}", **data)
        except FetchError as exc:
            return ToolResult.failure(f"Fetching {url} failed: {exc}", **data)
        except extract.Unreadable as exc:
            return ToolResult.failure(f"Fetching {url} failed: {exc}.", **data)
        except TimeoutError:
            return ToolResult.failure(
                f"Fetching {url} failed: no complete answer within {self.config.timeout:g} s "
                "(WEB_TIMEOUT).",
                **data,
            )
        except httpx.HTTPError as exc:
            return ToolResult.failure(
                f"Fetching {url} failed: the site could not be reached ({type(exc).__name__}"
                f"{': ' + str(exc) if str(exc) else ''}).",
                **data,
            )
        except Exception as exc:  # an extractor's surprise must not crash the run
            log.warning("web_fetch of %s failed", url, exc_info=True)
            return ToolResult.failure(f"Fetching {url} failed: {type(exc).__name__}.", **data)

    async def _fetch(self, url: str, screenshot_dir: Path | None) -> ToolResult:
        if self._client is not None:
            resp = await get(self._client, self.policy, url, self.config.max_bytes)
        else:
            async with guarded_client(self.policy, self.config.timeout) as client:
                resp = await get(client, self.policy, url, self.config.max_bytes)
        if resp.kind == "binary":
            raise FetchError(
                f"it is binary content ({resp.content_type or 'unknown type'}), which is not "
                "read; fetch pages, PDFs or text"
            )
        if resp.status >= 400:
            raise FetchError(f"the site answered HTTP {resp.status} {resp.reason}".rstrip())
        notes: list[str] = []
        if resp.truncated:
            notes.append(
                f"the page is larger than {self.config.max_bytes} bytes; only that much was read"
            )
        page = await asyncio.to_thread(_page_of, resp)
        data: dict[str, Any] = {
            "url": resp.url,
            "status": resp.status,
            "kind": page.kind,
            "truncated": resp.truncated,
            "redirects": resp.redirects,
            "rendered": False,
        }
        if page.kind == "html" and self._wants_render(resp, page):
            page, more = await self._render(resp, page, screenshot_dir, data)
            notes.extend(more)
        data.update(title=page.title, markdown=page.markdown[:MAX_CONTENT_CHARS], links=page.links)
        return ToolResult("success", format_page(str(data["url"]), page, notes), data)

    def _wants_render(self, resp: Response, page: extract.Page) -> bool:
        if self.config.render == "never":
            return False
        if self.config.render == "always":
            return True
        return extract.needs_scripts(extract.decode(resp.body, resp.encoding), page)

    async def _render(
        self,
        resp: Response,
        plain: extract.Page,
        screenshot_dir: Path | None,
        data: dict[str, Any],
    ) -> tuple[extract.Page, list[str]]:
        from backend.tools.web import render

        try:
            shown = await render.render(resp.url, self.policy, self.config, screenshot_dir)
        except render.RenderUnavailable as exc:
            if self.config.render == "auto":
                return plain, [f"the page seems to need scripts, but it was not rendered ({exc})"]
            return plain, [f"the page was not rendered ({exc})"]
        page = await asyncio.to_thread(extract.from_html, shown.html, shown.url)
        page.title = page.title or shown.title or plain.title
        data.update(url=shown.url, rendered=True)
        if shown.screenshot:
            data["screenshot"] = str(shown.screenshot)
        notes = ["rendered with headless Chromium"]
        if shown.blocked:
            notes.append(
                f"{len(shown.blocked)} request(s) of the page were refused by the network "
                f"policy: {', '.join(shown.blocked[:5])}"
            )
        return page, notes


def offered(settings: Any) -> bool:
    """Whether web_fetch is offered to the model under these settings."""
    return bool(settings.web_fetch)


async def web_fetch(url: str, settings: Any, screenshot_dir: Path | None = None) -> ToolResult:
    return await WebFetch(FetchConfig.from_settings(settings))(url, screenshot_dir)
