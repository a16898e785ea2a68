"""The Tools panel in real Chromium: the MCP servers of GET /api/mcp/servers (real SDK
servers over stdio), each with its state, tools, and for a failed one its error and last
stderr line; the empty state says how to configure servers."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from playwright.sync_api import Page, expect

from tests.e2e.server import Server, server_env
from tests.fakellm import FakeModelServer
from tests.support.browser import DIST
from tests.support.mcp import stdio

NewPage = Callable[..., Page]


def start_server(tmp_path: Path, fake_model: FakeModelServer, **extra: str) -> Server:
    env = server_env(tmp_path, fake_model.base_url, FRONTEND_DIST=str(DIST), **extra)
    return Server(tmp_path, env).start()


def test_panel_shows_a_ready_server_with_its_tools_and_a_failed_one_with_why(
    fake_model: FakeModelServer, new_page: NewPage, tmp_path: Path
) -> None:
    servers = {"calc": stdio("tools_server.py"), "broken": stdio("exits_at_start.py")}
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": servers}))
    server = start_server(tmp_path, fake_model, MCP_SERVERS_FILE=str(config))
    try:
        page = new_page()
        page.goto(server.url)
        page.get_by_test_id("open-tools").click()
        panel = page.get_by_test_id("tools-panel")
        expect(panel).to_be_visible()
        expect(panel.get_by_test_id("tools-summary")).to_have_text(
            "2 MCP servers: 1 ready, 1 failed"
        )

        calc = panel.locator('[data-testid="mcp-server"][data-name="calc"]')
        expect(calc.get_by_test_id("mcp-state")).to_have_text("ready")
        add = calc.get_by_test_id("mcp-tool").filter(has_text="add — ")
        expect(add).to_have_text("add — Add two numbers.")
        expect(calc.get_by_test_id("mcp-error")).to_have_count(0)
        expect(calc.get_by_test_id("mcp-stderr")).to_have_count(0)

        broken = panel.locator('[data-testid="mcp-server"][data-name="broken"]')
        expect(broken.get_by_test_id("mcp-state")).to_have_text("failed")
        expect(broken.get_by_test_id("mcp-error")).to_contain_text("closed the connection")
        expect(broken.get_by_test_id("mcp-tool")).to_have_count(0)
        stderr = broken.get_by_test_id("mcp-stderr").locator("pre")
        expect(stderr).to_be_visible()  # short: shown open
        expect(stderr).to_contain_text("fatal: TOKEN is not set")
        assert stderr.evaluate("e => getComputedStyle(e).fontFamily").lower().find("mono") >= 0

        # refresh asks the server again
        with page.expect_response("**/api/mcp/servers") as answer:
            panel.get_by_test_id("tools-refresh").click()
        assert answer.value.status == 200
        expect(broken.get_by_test_id("mcp-state")).to_have_text("failed")

        page.keyboard.press("Escape")
        expect(panel).to_be_hidden()
    finally:
        server.stop()


def test_panel_fits_a_phone(fake_model: FakeModelServer, new_page: NewPage, tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"broken": stdio("exits_at_start.py")}}))
    server = start_server(tmp_path, fake_model, MCP_SERVERS_FILE=str(config))
    try:
        page = new_page(390, 844, is_mobile=True, has_touch=True)
        page.goto(server.url)
        page.get_by_role("button", name="Conversations").click()
        page.get_by_test_id("open-tools").click()
        panel = page.get_by_test_id("tools-panel")
        expect(panel.get_by_test_id("mcp-state")).to_have_text("failed")
        box = panel.bounding_box()
        assert box is not None
        assert box["x"] >= 0 and box["x"] + box["width"] <= 390, box
        assert panel.evaluate("d => d.scrollWidth <= d.clientWidth")
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
    finally:
        server.stop()


def test_without_servers_the_panel_says_how_to_configure_them(
    ui_server: Server, new_page: NewPage
) -> None:
    page = new_page()
    page.goto(ui_server.url)
    page.get_by_test_id("open-tools").click()
    panel = page.get_by_test_id("tools-panel")
    expect(panel.get_by_test_id("tools-summary")).to_have_text("No MCP servers configured.")
    empty = panel.get_by_test_id("tools-empty")
    expect(empty).to_contain_text("MCP_SERVERS_FILE")
    expect(empty).to_contain_text("docs/tools.md")
    expect(panel.get_by_test_id("mcp-server")).to_have_count(0)


def test_a_refused_listing_is_said_in_the_panel(
    fake_model: FakeModelServer, new_page: NewPage, tmp_path: Path
) -> None:
    server = start_server(tmp_path, fake_model, AUTH_TOKEN="secret")
    try:
        page = new_page()
        page.goto(server.url)
        token_dialog = page.get_by_test_id("token-dialog")
        expect(token_dialog).to_be_visible()
        token_dialog.get_by_role("button", name="Cancel").click()
        page.get_by_test_id("open-tools").click()
        expect(token_dialog).to_be_visible()  # the listing asked for the token too
        token_dialog.get_by_role("button", name="Cancel").click()
        panel = page.get_by_test_id("tools-panel")
        expect(panel.get_by_test_id("tools-error")).to_contain_text(
            "Could not list the MCP servers"
        )
        expect(panel.get_by_test_id("mcp-server")).to_have_count(0)

        # with the token, Refresh lists them (none configured here)
        panel.get_by_test_id("tools-refresh").click()
        token_dialog.get_by_test_id("token-input").fill("secret")
        token_dialog.get_by_test_id("token-submit").click()
        expect(panel.get_by_test_id("tools-empty")).to_be_visible()
        expect(panel.get_by_test_id("tools-error")).to_have_count(0)
    finally:
        server.stop()
