"""Tool results in the web UI (real Chromium, the real server, the fake model): search results
as links, a fetched page as a title with an expandable extract, an MCP call with its
arguments and result."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

from playwright.sync_api import Page, expect

from tests.agent.scripts import finish, plan_reply
from tests.e2e.server import Server, server_env
from tests.fakellm import FakeModelServer
from tests.support.browser import DIST
from tests.tools.search.fakesearch import FakeSearch
from tests.tools.web.site import Site

NewPage = Callable[..., Page]
TOOLS_SERVER = Path(__file__).resolve().parents[1] / "tools" / "mcp" / "servers" / "tools_server.py"


def test_search_page_and_mcp_results_show_as_links_extract_and_call(
    tmp_path: Path, fake_model: FakeModelServer, new_page: NewPage
) -> None:
    searx, site = FakeSearch().start(), Site().start()
    mcp = tmp_path / "mcp.json"
    mcp.write_text(
        json.dumps(
            {"mcpServers": {"calc": {"command": sys.executable, "args": [str(TOOLS_SERVER)]}}}
        )
    )
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Look things up")},
        {
            "stage": "thinking",
            "content": "<web_search><query>nonce</query></web_search>"
            f"<web_fetch><url>{site.url}/</url></web_fetch>"
            '<mcp_tool><name>calc__add</name><arguments>{"a": 2, "b": 40}</arguments></mcp_tool>'
            + finish("looked"),
        },
        {"stage": "summary", "content": "Looked things up."},
    )
    env = server_env(
        tmp_path,
        fake_model.base_url,
        FRONTEND_DIST=str(DIST),
        SEARCH_PROVIDER="searxng",
        SEARCH_URL=searx.url,
        SEARCH_MAX="3",
        WEB_ALLOW_HOSTS=f"127.0.0.1:{site.port}",
        WEB_RENDER="never",
        MCP_SERVERS_FILE=str(mcp),
    )
    server = Server(tmp_path, env).start()
    try:
        page = new_page()
        page.goto(server.url)
        page.get_by_test_id("mode").select_option("agent")
        box = page.get_by_test_id("goal-input")
        box.fill("Look up the nonce")
        box.press("Enter")
        expect(page.get_by_test_id("summary")).to_be_visible()

        hits = page.get_by_test_id("search-hit")
        expect(hits).to_have_count(3)
        first = hits.nth(0).get_by_role("link")
        expect(first).to_have_text("Result 1")
        expect(first).to_have_attribute("href", "https://example.org/page1")
        expect(first).to_have_attribute("rel", "noopener noreferrer nofollow")

        web = page.get_by_test_id("web-page")
        expect(web.get_by_test_id("page-title")).to_have_text("Nonce Page")
        extract = web.get_by_test_id("page-extract")
        expect(extract).to_be_hidden()  # collapsed until the person opens it
        web.get_by_test_id("page-title").click()
        expect(extract).to_be_visible()
        expect(extract).to_contain_text(site.nonce)

        call = page.get_by_test_id("mcp-call")
        expect(call.get_by_test_id("mcp-name")).to_have_text("calc__add")
        expect(call.get_by_test_id("mcp-arguments")).to_contain_text('"b": 40')
        expect(call.get_by_test_id("mcp-part")).to_have_text("42.0")
    finally:
        server.stop()
        searx.stop()
        site.stop()
