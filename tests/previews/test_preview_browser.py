"""Previews in Chromium: the previewed app's script runs (its API route and WebSocket over the
preview origin), a static page's script runs, and a previewed page cannot read the API."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import pytest

from tests.agent.scripts import write
from tests.fakellm import FakeModelServer
from tests.support.previews import PreviewServer, app_script, done, start_app

pytestmark = [pytest.mark.e2e, pytest.mark.browser]


def test_the_previewed_app_runs_in_the_browser_and_cannot_read_the_api(
    preview_server: PreviewServer, fake_model: FakeModelServer, chromium: Any
) -> None:
    from playwright.sync_api import expect

    ps = preview_server
    _cid, url = start_app(ps, fake_model, f"pv{secrets.token_hex(6)}")
    page = chromium.new_page()
    try:
        page.goto(url)
        expect(page.locator("#api")).to_have_text("api:preview", timeout=20_000)
        expect(page.locator("#ws")).to_have_text("ws:ping", timeout=20_000)
        api = f"{ps.server.url}/api/conversations"
        outcome = page.evaluate(
            """async (api) => {
                try {
                    const r = await fetch(api, {credentials: "include"});
                    return "read:" + r.status + ":" + (await r.text());
                } catch (e) { return "blocked:" + e; }
            }""",
            api,
        )
        assert outcome.startswith("blocked:"), outcome
        assert page.evaluate("document.cookie") == ""
        # another preview's token (forged) is a 404 in the browser too
        forged = page.goto(f"{ps.preview_base}/p/{secrets.token_urlsafe(24)}/")
        assert forged is not None and forged.status == 404
    finally:
        page.close()


def test_a_static_page_runs_its_script_on_the_preview_origin(
    preview_server: PreviewServer, fake_model: FakeModelServer, chromium: Any, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    ps = preview_server
    html = "<html><body><p id=t>static</p><script src='js/app.js'></script></body></html>"
    app_script(
        fake_model,
        write("site/index.html", html)
        + write("site/js/app.js", "document.getElementById('t').textContent = 'scripted';\n")
        + done(),
    )
    _m, end, headers = ps.server.run({"goal": "Make a page"})
    assert end["status"] == "completed"
    with ps.server.client() as api:
        files = api.get(f"/api/conversations/{headers['x-conversation-id']}/files").json()
    url = next(f["preview_url"] for f in files if f["filepath"] == "site/index.html")
    page = chromium.new_page()
    try:
        page.goto(url)
        expect(page.locator("#t")).to_have_text("scripted", timeout=20_000)
        assert page.evaluate("location.origin") == ps.preview_base
    finally:
        page.close()
