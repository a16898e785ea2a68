"""The manager against a real MCP server over streamable HTTP on 127.0.0.1."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from backend.runtime.base import OUTPUT_CAP
from backend.tools.mcp import McpManager
from tests.support.mcp import HttpServerProcess
from tests.support.ports import free_port

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
    assert f"MCP server 'gone' at {url} cannot be reached: ConnectError" in (
        listing.failures[0].content
    )
    assert listing.down == {"gone": listing.failures[0].content}
    state = manager.states()[0]
    assert state["state"] == "failed" and state["error"].startswith(f"{url}: ConnectError")


async def test_a_killed_http_server_is_reconnected_when_it_is_back(
    make_manager: Make, http_server: HttpServerProcess
) -> None:
    manager = make_manager({"web": {"url": http_server.url}}, restart_backoff=0)
    first = int((await manager.call("web__pid", "{}")).content)
    http_server.kill()
    down = await manager.call("web__add", '{"a": 1, "b": 1}')
    assert down.status == "failure"
    assert down.content.startswith(
        f"MCP server 'web' at {http_server.url} was down when web__add was called (it could "
        "not be reached: ConnectError"
    )
    assert "stopped during the call" not in down.content
    assert manager.states()[0]["state"] == "failed"
    await anyio.to_thread.run_sync(http_server.start)  # off the loop: it waits for the port
    second = int((await manager.call("web__pid", "{}")).content)
    assert second != first
    assert (await manager.call("web__add", '{"a": 1, "b": 1}')).content == "2.0"


@pytest.mark.parametrize("mode", ["http", "http400"])
async def test_a_server_restarted_between_two_calls_gets_a_new_session(
    make_manager: Make, mode: str
) -> None:
    server = HttpServerProcess(mode)
    server.start()
    try:
        manager = make_manager({"web": {"url": server.url}})
        first = await manager.call("web__pid", "{}")
        assert first.ok, first.content
        server.kill()
        await anyio.to_thread.run_sync(server.start)  # the same port, a new process
        second = await manager.call("web__pid", "{}")
        assert second.ok, second.content  # the old session was refused: a new one, once
        assert int(second.content) != int(first.content) == int(first.content)
        assert manager._servers["web"].starts == 2
        assert (await manager.call("web__add", '{"a": 1, "b": 2}')).content == "3.0"
        assert manager._servers["web"].starts == 2  # the new session is kept
    finally:
        server.kill()


@pytest.mark.parametrize("mode", ["http", "http400", "http400text"])
async def test_a_server_restarted_between_each_two_calls_answers_the_second_after(
    make_manager: Make, mode: str
) -> None:
    """Killed and started again on the same port between calls, again and again: the first
    call after a restart may fail (a refusal of our session that does not say so), the
    second must succeed (a new session). Seen before: a plain-text 400 for the old session
    failed every call after the restart ("Server returned an error response")."""
    server = HttpServerProcess(mode)
    server.start()
    try:
        manager = make_manager({"web": {"url": server.url}})
        pids = [int((await manager.call("web__pid", "{}")).content)]
        for _ in range(3):
            server.kill()
            await anyio.to_thread.run_sync(server.start)  # the same port, a new process
            first = await manager.call("web__pid", "{}")
            if mode == "http400text":  # nothing says the session is gone
                assert not first.ok and "the next call starts a new one" in first.content
            else:  # a 404, or a 400 that says so: a new session at once
                assert first.ok, first.content
            second = await manager.call("web__pid", "{}")
            assert second.ok, second.content
            pids.append(int(second.content))
        assert len(set(pids)) == 4  # each answer came from the server then running
    finally:
        server.kill()


async def test_a_tool_error_at_400_is_not_taken_for_a_lost_session(make_manager: Make) -> None:
    server = HttpServerProcess("http400")
    server.start()
    try:
        manager = make_manager({"web": {"url": server.url}})
        failed = await manager.call("web__fail", '{"reason": "no quota"}')
        assert failed.status == "failure" and failed.content.endswith("no quota")
        assert manager._servers["web"].starts == 1
    finally:
        server.kill()


async def test_the_listing_says_failed_while_the_server_is_down_and_ready_when_it_is_back(
    make_manager: Make, http_server: HttpServerProcess
) -> None:
    manager = make_manager({"web": {"url": http_server.url}}, restart_backoff=0)
    await manager.refresh()
    assert manager.states()[0]["state"] == "ready"
    http_server.kill()
    await manager.refresh()  # asks the server: it is gone
    state = manager.states()[0]
    assert state["state"] == "failed" and state["tools"] == []
    assert state["error"].startswith(f"{http_server.url}: ConnectError")
    await anyio.to_thread.run_sync(http_server.start)
    await manager.refresh()  # back by itself: nobody restarted planact
    state = manager.states()[0]
    assert state["state"] == "ready" and "error" not in state
    assert (await manager.call("web__add", '{"a": 1, "b": 1}')).content == "2.0"


async def test_the_listing_renews_the_session_of_a_restarted_server(
    make_manager: Make, http_server: HttpServerProcess
) -> None:
    manager = make_manager({"web": {"url": http_server.url}})
    await manager.refresh()
    http_server.kill()
    await anyio.to_thread.run_sync(http_server.start)
    await manager.refresh()
    assert manager.states()[0]["state"] == "ready"
    assert manager._servers["web"].starts == 2
    assert (await manager.call("web__add", '{"a": 2, "b": 2}')).content == "4.0"
    assert manager._servers["web"].starts == 2


async def test_progress_notifications_reach_the_caller_while_the_call_runs(
    make_manager: Make, http_server: HttpServerProcess, tmp_path: Path
) -> None:
    manager = make_manager({"web": {"url": http_server.url}})
    gate = tmp_path / "gate"
    lines: list[str] = []

    async def on_progress(line: str) -> None:
        lines.append(line)
        gate.touch()  # the tool goes on only once its first progress arrived here

    args = json.dumps({"count": 3, "gate": str(gate)})
    result = await manager.call("web__steps", args, on_progress=on_progress)
    assert result.content == "3 steps done"
    assert lines == ["1/3: step 1 of 3\n", "2/3: step 2 of 3\n", "3/3: step 3 of 3\n"]


async def test_a_tool_callable_only_as_a_task_is_not_offered(
    make_manager: Make, http_server: HttpServerProcess
) -> None:
    manager = make_manager({"web": {"url": http_server.url}})
    listing = await manager.tools_for(["web"])
    names = {t.name for t in listing.tools}
    assert "web__add" in names and "web__queued" not in names
    refused = await manager.call("web__queued", "{}")
    assert refused.status == "failure"
    assert refused.content.startswith(
        "MCP tool web__queued is not offered: it can only be called as a task"
    )
    assert "web__add" in refused.content
    (listed,) = [t for t in manager.states()[0]["tools"] if t["name"] == "queued"]
    assert listed["description"].startswith("(not offered: it can only be called as a task")


async def test_a_call_cut_off_by_a_restart_is_not_sent_again(
    make_manager: Make, http_server: HttpServerProcess, tmp_path: Path
) -> None:
    manager = make_manager({"web": {"url": http_server.url}})
    gate = tmp_path / "gate"  # never made: a call sent again would wait for it until its timeout
    back = anyio.Event()

    async def on_progress(line: str) -> None:  # the call runs: the server restarts under it
        if line.startswith("1/"):
            await anyio.to_thread.run_sync(http_server.kill)
            await anyio.to_thread.run_sync(http_server.start)
            back.set()

    args = json.dumps({"count": 2, "gate": str(gate)})
    result = await manager.call("web__steps", args, timeout=20, on_progress=on_progress)
    assert result.status == "failure"
    assert "stopped during the call to web__steps" in result.content  # it may have run
    assert "timed out" not in result.content
    await back.wait()  # the new process accepts connections
    assert (await manager.call("web__add", '{"a": 1, "b": 1}')).content == "2.0"
