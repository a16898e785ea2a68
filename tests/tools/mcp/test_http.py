"""The manager against a real MCP server over streamable HTTP on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Callable

import anyio

from backend.runtime.base import OUTPUT_CAP
from backend.tools.mcp import McpManager
from tests.tools.mcp.conftest import HttpServerProcess, free_port

Make = Callable[..., McpManager]


async def test_calls_a_tool_over_http(make_manager: Make, http_server: HttpServerProcess) -> None:
    manager = make_manager({"web": {"url": http_server.url}})
    listing = await manager.tools_for(["web"])
    assert "web__add" in {t.name for t in listing.tools}
    result = await manager.call("web__add", '{"a": 0.5, "b": 0.25}')
    assert (result.status, result.content) == ("success", "0.75")
    state = manager.states()[0]
    assert state["state"] == "ready" and "stderr" not in state


async def test_faults_over_http(make_manager: Make, http_server: HttpServerProcess) -> None:
    manager = make_manager({"web": {"url": http_server.url}})
    failed = await manager.call("web__fail", '{"reason": "no quota"}')
    assert failed.status == "failure" and failed.content.endswith("no quota")
    hung = await manager.call("web__hang", "{}", timeout=0.5)
    assert hung.content == "MCP tool web__hang timed out after 0.5 s."
    big = await manager.call("web__big", '{"megabytes": 10}', timeout=120)
    assert big.status == "success" and len(big.content) < OUTPUT_CAP + 200
    assert (await manager.call("web__add", '{"a": 1, "b": 1}')).content == "2.0"


async def test_an_unreachable_server_is_failed_with_its_error(make_manager: Make) -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"
    manager = make_manager({"gone": {"url": url}})
    listing = await manager.tools_for(None)
    assert f"MCP server 'gone' at {url} could not start: ConnectError" in (
        listing.failures[0].content
    )
    state = manager.states()[0]
    assert state["state"] == "failed" and state["error"]


async def test_a_killed_http_server_is_reconnected_when_it_is_back(
    make_manager: Make, http_server: HttpServerProcess
) -> None:
    manager = make_manager({"web": {"url": http_server.url}}, restart_backoff=0)
    first = int((await manager.call("web__pid", "{}")).content)
    http_server.kill()
    down = await manager.call("web__add", '{"a": 1, "b": 1}')
    assert down.status == "failure"
    assert "MCP server 'web' stopped during the call to web__add (ConnectError" in down.content
    assert manager.states()[0]["state"] == "failed"
    await anyio.to_thread.run_sync(http_server.start)  # off the loop: it waits for the port
    second = int((await manager.call("web__pid", "{}")).content)
    assert second != first
    assert (await manager.call("web__add", '{"a": 1, "b": 1}')).content == "2.0"
