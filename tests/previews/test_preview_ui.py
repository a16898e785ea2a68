"""The UI's App panel (Chromium, the built UI served by the real server): the previewed app in
a frame with its address, reload, open in a new tab, state, live log and stop/restart, at a
desktop width and at 390 px."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.agent.scripts import plan_reply
from tests.fakellm import FakeModelServer
from tests.support.browser import DIST
from tests.support.previews import (
    PreviewServer,
    done,
    preview_tag,
    processes_with,
    start_app,
    start_preview_server,
    write_app,
)

pytestmark = [pytest.mark.e2e, pytest.mark.browser, pytest.mark.bwrap]


@pytest.fixture
def ui_preview_server(tmp_path: Path, fake_model: FakeModelServer) -> Iterator[PreviewServer]:
    if not (DIST / "index.html").is_file():
        if os.environ.get("REQUIRE_BROWSER") == "1":
            pytest.fail("REQUIRE_BROWSER=1 but frontend/dist is not built (make frontend)")
        pytest.skip("frontend/dist is not built (make frontend)")
    yield from start_preview_server("local-bwrap", tmp_path, fake_model, FRONTEND_DIST=str(DIST))


@pytest.mark.parametrize("width", [1280, 390])
def test_the_app_panel_shows_reloads_stops_and_restarts_the_preview(
    ui_preview_server: PreviewServer,
    fake_model: FakeModelServer,
    chromium: Any,
    width: int,
) -> None:
    from playwright.sync_api import expect

    ps = ui_preview_server
    marker = f"pv{secrets.token_hex(6)}"
    cid, url = start_app(ps, fake_model, marker)
    context = chromium.new_context(viewport={"width": width, "height": 800})
    context.set_default_timeout(20_000)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(f"{ps.server.url}/#/c/{cid}")
        page.get_by_test_id("open-app").click()
        panel = page.get_by_test_id("app-panel")
        expect(panel).to_be_visible()
        expect(page.get_by_test_id("app-address")).to_have_value(url)
        expect(page.get_by_test_id("app-state")).to_have_text("running")
        expect(page.get_by_test_id("app-open")).to_have_attribute("href", url)
        frame = page.frame_locator("[data-testid=app-frame]")
        expect(frame.locator("#api")).to_have_text("api:preview")
        expect(frame.locator("#ws")).to_have_text("ws:ping")
        expect(page.get_by_test_id("app-log")).to_contain_text("listening on 8080")
        box = panel.bounding_box()
        assert box is not None
        if width <= 400:  # a sheet over the conversation on a phone
            assert box["width"] <= width and box["width"] >= width - 2
        else:  # beside the conversation
            assert box["x"] > 300 and box["width"] < width
        # reload: a fresh page in the frame (a mark set in the old one is gone)
        inner = page.frame_locator("[data-testid=app-frame]").locator("body")
        inner.evaluate("() => { window.__mark = 1 }")
        page.get_by_test_id("app-reload").click()
        expect(frame.locator("#api")).to_have_text("api:preview")
        assert inner.evaluate("() => window.__mark === undefined")
        # stop, then restart
        page.get_by_test_id("app-stop").click()
        expect(page.get_by_test_id("app-state")).to_have_text("stopped")
        expect(page.get_by_test_id("app-frame")).to_have_count(0)
        assert processes_with(marker) == []
        page.get_by_test_id("app-restart").click()
        expect(page.get_by_test_id("app-state")).to_have_text("running")
        expect(frame.locator("#api")).to_have_text("api:preview")
        assert processes_with(marker)
        # the frame runs on the preview origin, not the UI's
        assert page.get_by_test_id("app-address").input_value().startswith(ps.preview_base)
        assert not errors, errors
    finally:
        context.close()


def test_the_app_panel_appears_the_moment_a_preview_is_ready_without_a_reload(
    ui_preview_server: PreviewServer, fake_model: FakeModelServer, chromium: Any
) -> None:
    """The preview action's result lands among the task's entries: the App button and panel
    follow it live, while the run still goes on (the model's next reply waits)."""
    from playwright.sync_api import expect

    ps = ui_preview_server
    marker = f"pv{secrets.token_hex(6)}"
    fake_model.script(
        {"stage": "route", "content": '{"task_type": "code_generation", "needs_tools": true}'},
        {"stage": "planning", "content": plan_reply("Build and preview the app")},
        {
            "stage": "thinking",
            "content": write_app() + preview_tag(8080, f"python3 app.py 8080 {marker}"),
        },
        # the run waits after the preview, before its last reply
        {"stage": "thinking", "content": done(), "hold": "finish"},
        {"stage": "summary", "content": "Previewed the app."},
    )
    context = chromium.new_context(viewport={"width": 1280, "height": 800})
    context.set_default_timeout(30_000)
    page = context.new_page()
    try:
        page.goto(ps.server.url + "/")
        page.get_by_test_id("goal-input").fill("Build me an app and show it")
        page.get_by_test_id("send").click()
        expect(page.get_by_test_id("open-app")).to_be_visible()  # no reload
        expect(page.get_by_test_id("app-panel")).to_be_visible()
        frame = page.frame_locator("[data-testid=app-frame]")
        expect(frame.locator("#api")).to_have_text("api:preview")
        expect(page.get_by_test_id("conversation-status")).to_have_text("running")
    finally:
        fake_model.release("finish")
        context.close()
