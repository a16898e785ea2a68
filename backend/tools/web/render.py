"""A page rendered by headless Chromium (Playwright), every request through the network policy.

Chromium never reaches the network itself: each request the page makes is intercepted and
answered by our guarded httpx client (checked URL, checked DNS answers, capped body); the
browser's own proxy points at a closed port and its resolver answers nothing, so a request
that escaped interception (a WebSocket, a prefetch) goes nowhere. Playwright is optional:
without it (or without Chromium) :class:`RenderUnavailable` says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from backend.tools.web.policy import NetworkPolicy, Refused, guarded_client

if TYPE_CHECKING:
    from backend.tools.web.config import FetchConfig

# a page's requests together read at most this many times WEB_MAX_BYTES
TOTAL_BYTES_FACTOR = 4
DROP_HEADERS = {"content-encoding", "content-length", "transfer-encoding", "connection"}
SEND_SKIP = {"host", "content-length", "connection", "accept-encoding"}


class RenderUnavailable(Exception):
    """Rendering cannot run here (no Playwright, no Chromium, a launch failure)."""


@dataclass
class Rendered:
    url: str
    title: str
    html: str
    screenshot: Path | None = None
    blocked: list[str] = field(default_factory=list)


def available(chromium_path: str) -> str | None:
    """Why rendering cannot run (None: it can)."""
    try:
        import playwright.async_api  # noqa: F401
    except ImportError:
        return "Playwright is not installed"
    if not os.access(chromium_path, os.X_OK):
        return f"no Chromium at {chromium_path} (set CHROMIUM_PATH)"
    return None


class _Relay:
    """Answers the page's requests through the guarded client, within a byte budget."""

    def __init__(self, client: httpx.AsyncClient, policy: NetworkPolicy, budget: int) -> None:
        self.client = client
        self.policy = policy
        self.budget = budget
        self.blocked: list[str] = []

    async def handle(self, route: Any) -> None:
        request = route.request
        try:
            self.policy.check_url(request.url)
            headers = {k: v for k, v in request.headers.items() if k.lower() not in SEND_SKIP}
            req = self.client.build_request(
                request.method, request.url, headers=headers, content=request.post_data_buffer
            )
            resp = await self.client.send(req, stream=True)
            try:
                body = bytearray()
                async for chunk in resp.aiter_bytes():
                    body += chunk
                    if len(body) > self.budget:
                        raise OverflowError
                self.budget -= len(body)
                out = {k: v for k, v in resp.headers.items() if k.lower() not in DROP_HEADERS}
                await route.fulfill(status=resp.status_code, headers=out, body=bytes(body))
            finally:
                await resp.aclose()
        except Refused:
            self.blocked.append(request.url)
            await route.abort("blockedbyclient")
        except OverflowError:
            self.blocked.append(request.url)
            await route.abort("blockedbyclient")
        except Exception:
            await route.abort("failed")


async def render(
    url: str, policy: NetworkPolicy, config: FetchConfig, screenshot_dir: Path | None
) -> Rendered:
    problem = available(config.chromium_path)
    if problem:
        raise RenderUnavailable(problem)
    from playwright.async_api import Error as PlaywrightError

    try:
        return await _render(url, policy, config, screenshot_dir)
    except PlaywrightError as exc:  # Chromium died or refused mid-way
        raise RenderUnavailable(f"Chromium failed: {exc.message[:200]}") from exc


async def _render(
    url: str, policy: NetworkPolicy, config: FetchConfig, screenshot_dir: Path | None
) -> Rendered:
    from playwright.async_api import Error as PlaywrightError
    from playwright.async_api import async_playwright

    async with async_playwright() as pw, guarded_client(policy, config.timeout) as client:
        try:
            browser = await pw.chromium.launch(
                executable_path=config.chromium_path,
                headless=True,
                args=["--no-sandbox", "--host-resolver-rules=MAP * ~NOTFOUND"],
                # requests not answered by the relay go to a closed port, loopback included
                proxy={"server": "http://127.0.0.1:9", "bypass": "<-loopback>"},
            )
        except PlaywrightError as exc:
            raise RenderUnavailable(f"Chromium did not start: {exc.message[:200]}") from exc
        try:
            context = await browser.new_context(
                service_workers="block", java_script_enabled=True, accept_downloads=False
            )
            relay = _Relay(client, policy, config.max_bytes * TOTAL_BYTES_FACTOR)
            await context.route("**/*", relay.handle)
            page = await context.new_page()
            timeout_ms = config.timeout * 1000
            try:
                await page.goto(url, wait_until="load", timeout=timeout_ms)
            except PlaywrightError as exc:
                message = exc.message[:200]
                raise RenderUnavailable(f"Chromium could not load the page: {message}") from exc
            with contextlib.suppress(PlaywrightError):  # let scripts finish requests, briefly
                await page.wait_for_load_state("networkidle", timeout=min(3000, timeout_ms))
            shot: Path | None = None
            if screenshot_dir is not None:
                screenshot_dir.mkdir(parents=True, exist_ok=True)
                digest = hashlib.sha1(page.url.encode()).hexdigest()[:10]
                shot = screenshot_dir / f"web-{digest}-{time.time_ns() // 1_000_000}.png"
                await page.screenshot(path=str(shot))
            html = await page.content()
            title = await page.title()
            return Rendered(
                url=page.url, title=title, html=html, screenshot=shot, blocked=relay.blocked
            )
        finally:
            await asyncio.shield(browser.close())
