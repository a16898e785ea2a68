"""MCP in a run, in the web UI (real Chromium, the real server, the fake model, real SDK
servers over stdio): an image result drawn as an image with a link to its saved file, a
long tool's progress live in its running card, and a server that dies at start shown as
one quiet line in the run (never a failed tool card) and as failed in the Tools panel."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

from playwright.sync_api import Page, expect

from tests.agent.scripts import finish, plan_reply
from tests.e2e.server import Server, server_env
from tests.fakellm import FakeModelServer
from tests.support.browser import DIST
from tests.support.mcp import stdio

NewPage = Callable[..., Page]


def start_server(tmp_path: Path, fake_model: FakeModelServer) -> Server:
    config = tmp_path / "mcp.json"
    servers = {"calc": stdio("tools_server.py"), "broken": stdio("exits_at_start.py")}
    config.write_text(json.dumps({"mcpServers": servers}))
    env = server_env(
        tmp_path,
        fake_model.base_url,
        FRONTEND_DIST=str(DIST),
        MCP_SERVERS_FILE=str(config),
        WEB_FETCH="0",
    )
    return Server(tmp_path, env).start()


def send(page: Page, goal: str) -> None:
    page.get_by_test_id("mode").select_option("agent")
    box = page.get_by_test_id("goal-input")
    box.fill(goal)
    box.press("Enter")


def test_an_image_shows_as_an_image_with_a_link_and_progress_shows_live(
    tmp_path: Path, fake_model: FakeModelServer, new_page: NewPage
) -> None:
    gate = tmp_path / "gate"
    steps = json.dumps({"count": 3, "gate": str(gate)})
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Draw and count")},
        {
            "stage": "thinking",
            "content": "<mcp_tool><name>calc__image</name><arguments>{}</arguments></mcp_tool>"
            f"<mcp_tool><name>calc__steps</name><arguments>{steps}</arguments></mcp_tool>",
        },
        {"stage": "thinking", "content": finish("drawn and counted")},
    )
    server = start_server(tmp_path, fake_model)
    try:
        page = new_page()
        page.goto(server.url)
        send(page, "Draw a picture and count")

        # the image (the first call): drawn from the saved file, with a link to it
        figure = page.get_by_test_id("mcp-image")
        expect(figure).to_have_count(1)
        img = figure.get_by_test_id("mcp-image-img")
        expect(img).to_be_visible()
        page.wait_for_function(
            "e => e.complete && e.naturalWidth === 1", arg=img.element_handle()
        )  # it loaded: a real PNG through the download route
        link = figure.get_by_test_id("mcp-file-link")
        expect(link).to_have_text(re.compile(r"^mcp_files/mcp_calc__image_.*\.png$"))
        href = link.get_attribute("href") or ""
        assert href.startswith("/api/files/") and href.endswith(".png")
        got = page.request.get(server.url + href)
        assert got.status == 200 and got.body().startswith(b"\x89PNG")
        expect(page.get_by_text("[image")).to_have_count(0)  # no bare "[image]" any more

        # the long tool (the second): its progress in its running card, while it runs
        running = page.locator('[data-testid="action-mcp_tool"][data-state="running"]')
        expect(running).to_contain_text("1/3: step 1 of 3")
        gate.touch()  # only now does the tool go on
        expect(page.get_by_test_id("summary")).to_be_visible()
        steps_card = page.get_by_test_id("action-mcp_tool").filter(has_text="calc__steps")
        expect(steps_card.get_by_test_id("mcp-part")).to_have_text("3 steps done")
    finally:
        server.stop()


def test_a_server_that_dies_at_start_is_a_quiet_line_never_a_failed_card(
    tmp_path: Path, fake_model: FakeModelServer, new_page: NewPage
) -> None:
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Write nothing")},
        {"stage": "thinking", "content": finish("nothing to do")},
    )
    server = start_server(tmp_path, fake_model)
    try:
        page = new_page()
        page.goto(server.url)
        send(page, "Do nothing much")
        expect(page.get_by_test_id("summary")).to_be_visible()
        notice = page.get_by_test_id("run-notice")
        expect(notice).to_have_count(1)
        expect(notice).to_be_visible()  # shown, not folded away like reasoning
        expect(notice).to_contain_text("MCP server 'broken' could not start")
        expect(page.get_by_test_id("action-mcp_tool")).to_have_count(0)  # no card
        expect(page.locator('[data-state="failure"]')).to_have_count(0)  # nothing looks failed

        # the operator's place: the Tools panel
        page.get_by_test_id("open-tools").click()
        broken = page.locator('[data-testid="mcp-server"][data-name="broken"]')
        expect(broken.get_by_test_id("mcp-state")).to_have_text("failed")
        expect(broken.get_by_test_id("mcp-stderr")).to_contain_text("fatal: TOKEN is not set")
    finally:
        server.stop()
