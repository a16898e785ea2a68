"""Tools in the loop, black-box: the real server, the fake model over HTTP, a fake SearXNG,
a small site on 127.0.0.1 and real MCP servers written with the SDK."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.agent.scripts import finish, plan_reply, write
from tests.e2e.cluster import Worker
from tests.e2e.server import Server, running_server, server_env, wait_for
from tests.fakellm import FakeModelServer
from tests.pg import postgres_url, reset
from tests.sse_client import iter_events
from tests.tools.search.fakesearch import FakeSearch
from tests.tools.web.site import Site

pytestmark = pytest.mark.e2e

SERVERS = Path(__file__).resolve().parent.parent / "tools" / "mcp" / "servers"
ROUTE = {"stage": "route", "content": '{"task_type": "code_generation", "needs_tools": true}'}


def one_task(*thinking: str) -> list[dict[str, Any]]:
    return [
        ROUTE,
        {"stage": "planning", "content": plan_reply("Do it")},
        *({"stage": "thinking", "content": t} for t in thinking),
        {"stage": "summary", "content": "Done."},
    ]


def thinking_calls(fake: FakeModelServer) -> list[list[dict[str, Any]]]:
    return [c["messages"] for c in fake.model.calls if c["stage"] == "thinking"]


def text_of(messages: list[dict[str, Any]]) -> str:
    return "\n".join(str(m.get("content") or "") for m in messages)


def finals(messages: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [m for m in messages if m["meta"]["action_type"] == kind and m["status"] != "running"]


@pytest.fixture
def searx() -> Iterator[FakeSearch]:
    fake = FakeSearch().start()
    yield fake
    fake.stop()


@pytest.fixture
def site() -> Iterator[Site]:
    s = Site().start()
    yield s
    s.stop()


def test_the_model_searches_fetches_a_page_and_writes_its_nonce(
    tmp_path: Path, fake_model: FakeModelServer, searx: FakeSearch, site: Site
) -> None:
    fake_model.script(
        *one_task(
            "<web_search><query>planact nonce page</query></web_search>",
            f"<web_fetch><url>{site.url}/</url></web_fetch>",
            write("nonce.txt", site.nonce) + finish("wrote the nonce"),
        )
    )
    env = {
        "SEARCH_PROVIDER": "searxng",
        "SEARCH_URL": searx.url,
        "SEARCH_MAX": "3",
        "WEB_ALLOW_HOSTS": f"127.0.0.1:{site.port}",
        "WEB_RENDER": "never",
    }
    with running_server(tmp_path, fake_model.base_url, **env) as server:
        messages, end, headers = server.run({"goal": "Find the nonce and save it"})
        assert end["status"] == "completed"
        cid = headers["x-conversation-id"]
        with server.client() as c:
            saved = c.get(f"/api/files/{cid}/nonce.txt").text

    searches = [m for m in messages if m["meta"]["action_type"] == "search"]
    assert [m["status"] for m in searches] == ["running", "success"]
    results = searches[1]["meta"]["json"]
    assert [r["title"] for r in results] == ["Result 1", "Result 2", "Result 3"]
    assert results[0]["url"] == "https://example.org/page1"
    assert searx.requests[0]["query"]["q"] == ["planact nonce page"]

    (page_msg,) = finals(messages, "browser")
    assert page_msg["status"] == "success"
    page = page_msg["meta"]["json"][0]
    assert page["title"] == "Nonce Page"
    assert site.nonce in page["markdown"]
    assert page_msg["meta"]["url"].startswith(site.url)
    assert any(link["url"].endswith("/about") for link in page["links"])

    calls = thinking_calls(fake_model)
    assert len(calls) == 3
    system = calls[0][0]["content"]
    assert "<web_search>" in system and "<web_fetch>" in system
    assert "<mcp_tool>" not in system  # no MCP servers configured here
    assert "Result 1" in text_of(calls[1])  # the search results reached the model
    assert site.nonce in text_of(calls[2])  # and so did the page
    assert saved.strip() == site.nonce


def test_a_stop_cancels_a_page_fetch_in_flight_and_closes_its_message(
    tmp_path: Path, fake_model: FakeModelServer, site: Site
) -> None:
    fake_model.script(*one_task(f"<web_fetch><url>{site.url}/slow</url></web_fetch>"))
    env = {"WEB_ALLOW_HOSTS": f"127.0.0.1:{site.port}", "WEB_TIMEOUT": "120"}
    with (
        running_server(tmp_path, fake_model.base_url, **env) as server,
        server.client() as c,
        c.stream("POST", "/api/agent/run", json={"goal": "Read the slow page"}) as resp,
    ):
        rid = resp.headers["x-run-id"]
        seen: list[dict[str, Any]] = []
        end = None
        for event in iter_events(resp.iter_lines()):
            if event.event == "end":
                end = event.json
                break
            if event.event != "message":
                continue
            msg = event.json
            seen.append(msg)
            if msg["meta"]["action_type"] == "browser" and msg["status"] == "running":
                wait_for(lambda: "/slow" in site.paths, what="the fetch to reach the site")
                assert c.post(f"/api/agent/runs/{rid}/stop").status_code == 202
    assert end is not None and end["status"] == "stopped"
    browser = [m for m in seen if m["meta"]["action_type"] == "browser"]
    assert [m["status"] for m in browser] == ["running", "failure"]
    assert "/slow" in site.paths


def mcp_file(tmp_path: Path) -> Path:
    path = tmp_path / "mcp.json"
    servers = {
        "calc": {"command": sys.executable, "args": [str(SERVERS / "tools_server.py")]},
        "broken": {"command": sys.executable, "args": [str(SERVERS / "exits_at_start.py")]},
    }
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def test_an_mcp_tool_result_reaches_the_model_and_failures_do_not_end_the_run(
    tmp_path: Path, fake_model: FakeModelServer
) -> None:
    fake_model.script(
        *one_task(
            '<mcp_tool><name>calc__add</name><arguments>{"a": 2, "b": 40}</arguments></mcp_tool>',
            '<mcp_tool><name>calc__fail</name><arguments>{"reason": "no luck"}</arguments>'
            "</mcp_tool>",
            '<mcp_tool><name>calc__add</name><arguments>{"a": "x"</arguments></mcp_tool>',
            finish("added"),
        )
    )
    env = {"MCP_SERVERS_FILE": str(mcp_file(tmp_path)), "WEB_FETCH": "0"}
    with running_server(tmp_path, fake_model.base_url, **env) as server:
        with server.client() as c:
            for bad in (["nope"], "calc", [1]):
                resp = c.post("/api/agent/run", json={"goal": "x", "mcp_servers": bad})
                assert resp.status_code == 400, resp.text
                assert "mcp_servers" in resp.json()["error"]["message"]
        messages, end, _ = server.run({"goal": "Add numbers", "mcp_servers": ["calc", "broken"]})
    assert end["status"] == "completed"

    calls = finals(messages, "mcp_tool")
    assert not [m for m in calls if "broken" in m["content"]]  # no card: the model called none
    (notice,) = [m for m in messages if m["type"] == "notice"]  # the server that exits: named
    assert "'broken' could not start" in notice["content"]
    assert "TOKEN is not set" in notice["content"]
    done = [m for m in calls if m["meta"]["json"] and m["meta"]["json"][0].get("name")]
    assert done == calls
    assert [m["status"] for m in done] == ["success", "failure", "failure"]
    assert done[0]["meta"]["json"][0]["arguments"] == {"a": 2, "b": 40}
    assert done[0]["meta"]["json"][0]["parts"] == [{"type": "text", "text": "42.0"}]
    assert "no luck" in done[1]["content"]

    thinking = thinking_calls(fake_model)
    system = thinking[0][0]["content"]
    assert "calc__add" in system and '"a"' in system  # each tool with its schema
    assert "broken" in system and "TOKEN is not set" in system  # and what failed to start
    assert "<web_search>" not in system and "<web_fetch>" not in system
    assert "42.0" in text_of(thinking[1])  # the add tool's result reached the next call
    assert "no luck" in text_of(thinking[2])
    assert "calc__add" in text_of(thinking[3]) and "FAILED" in text_of(thinking[3])


def test_a_queue_worker_offers_only_the_mcp_servers_the_run_picked(
    tmp_path: Path, fake_model: FakeModelServer
) -> None:
    url = postgres_url()
    reset(url)
    fake_model.script(
        *one_task(
            "<mcp_tool><name>broken__anything</name><arguments>{}</arguments></mcp_tool>",
            finish("refused"),
        )
    )
    env = server_env(tmp_path, fake_model.base_url, DATABASE_URL=url, EXECUTOR="queue")
    env |= {"MCP_SERVERS_FILE": str(mcp_file(tmp_path)), "WEB_FETCH": "0"}
    server = Server(tmp_path, env).start()
    worker = Worker(tmp_path, env, "w").start()
    try:
        messages, end, _ = server.run({"goal": "Add numbers", "mcp_servers": ["calc"]})
    finally:
        worker.stop()
        server.stop()
    assert end["status"] == "completed"
    system = thinking_calls(fake_model)[0][0]["content"]
    # the worker read the pick from the store: calc's tools, nothing of the other server
    assert "calc__add" in system and "broken" not in system
    refused = finals(messages, "mcp_tool")
    assert refused and refused[-1]["status"] == "failure"
    assert "calc" in refused[-1]["content"]  # the call to a server the run did not pick
