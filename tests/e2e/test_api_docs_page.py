"""GET /api/docs in a real Chromium: Swagger UI renders the document from assets planact
serves, under the UI's Content-Security-Policy, and asks nothing of another origin."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.server import Server, server_env
from tests.fakellm import FakeModelServer
from tests.support.browser import launched_chromium

pytestmark = [pytest.mark.e2e, pytest.mark.browser]


@pytest.fixture
def chromium() -> Iterator[object]:
    yield from launched_chromium()


def test_the_docs_page_renders_every_route_from_local_assets(
    tmp_path: Path, fake_model: FakeModelServer, chromium: object
) -> None:
    from playwright.sync_api import expect

    env = server_env(tmp_path, fake_model.base_url, AUTH_TOKEN="docs-token")
    server = Server(tmp_path, env).start()
    try:
        page = chromium.new_page()  # type: ignore[attr-defined]
        problems: list[str] = []
        requested: list[str] = []
        page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: problems.append(str(e)))
        page.on("request", lambda r: requested.append(r.url))
        page.goto(f"{server.url}/api/docs")
        expect(page.locator(".swagger-ui .info .title")).to_contain_text("planact")
        run = page.locator(".opblock-summary-path", has_text="/api/agent/run").first
        expect(run).to_be_visible()
        paths = page.locator(".opblock-summary-path").all_inner_texts()
        assert "/api/ready" in " ".join(paths) and len(paths) >= 20
        assert problems == []  # a script the policy refused would be reported here
        assert requested and all(
            u.startswith(server.url) or u.startswith("data:") for u in requested
        )
    finally:
        server.stop()
