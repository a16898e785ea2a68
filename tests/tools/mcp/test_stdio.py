"""The manager against real MCP servers over stdio: results, faults, states, restarts."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from backend.runtime.base import OUTPUT_CAP
from backend.tools.mcp import McpManager
from backend.tools.mcp.manager import BACKOFF_MAX
from tests.procs import alive
from tests.support.mcp import await_until, server_pid, stdio

Make = Callable[..., McpManager]


async def test_lists_tools_with_schemas_and_adds(make_manager: Make) -> None:
    manager = make_manager({"calc": stdio("tools_server.py")})
    listing = await manager.tools_for(None)
    assert listing.failures == []
    add = next(t for t in listing.tools if t.name == "calc__add")
    assert add.description == "Add two numbers."
    assert set(add.input_schema["properties"]) == {"a", "b"}
    assert add.to_dict()["input_schema"]["required"] == ["a", "b"]
    result = await manager.call("calc__add", '{"a": 2, "b": 40}')
    assert (result.status, result.content) == ("success", "42.0")
    assert result.parts == [{"type": "text", "text": "42.0"}]


async def test_servers_start_lazily_and_are_reused(make_manager: Make) -> None:
    manager = make_manager({"calc": stdio("tools_server.py")})
    assert manager.started() == []
    assert manager.states()[0]["error"] == "not started yet"
    first = await server_pid(manager, "calc")
    assert await server_pid(manager, "calc") == first
    assert manager.states()[0]["state"] == "ready"


async def test_tool_error_is_a_failure_with_its_message(make_manager: Make) -> None:
    manager = make_manager({"calc": stdio("tools_server.py")})
    result = await manager.call("calc__fail", '{"reason": "disk on fire"}')
    assert result.status == "failure"
    assert result.content.startswith("The tool calc__fail reported an error: ")
    assert result.content.endswith("disk on fire")


async def test_wrong_arguments_are_failures_the_model_can_read(make_manager: Make) -> None:
    manager = make_manager({"calc": stdio("tools_server.py")})
    not_json = await manager.call("calc__add", '{"a": 1,')
    assert not_json.status == "failure" and "not valid JSON" in not_json.content
    not_object = await manager.call("calc__add", "[1, 2]")
    assert not_object.status == "failure" and "must be a JSON object" in not_object.content
    mismatch = await manager.call("calc__add", '{"a": "one"}')
    assert mismatch.status == "failure"
    assert "a\n" in mismatch.content and "Field required" in mismatch.content  # the server's
    assert manager.started() == ["calc"]  # the two first were refused before starting it


async def test_unknown_names_are_failures_naming_what_exists(make_manager: Make) -> None:
    manager = make_manager({"calc": stdio("tools_server.py")})
    no_sep = await manager.call("calc_add", "{}")
    assert no_sep.status == "failure" and "must be server__tool" in no_sep.content
    server = await manager.call("maths__add", "{}")
    assert server.status == "failure"
    assert "Unknown MCP server 'maths'; configured: calc" in server.content
    tool = await manager.call("calc__mul", "{}")
    assert tool.status == "failure"
    assert "no tool 'mul'" in tool.content and "calc__add" in tool.content
    listing = await manager.tools_for(["maths"])
    assert listing.tools == [] and "Unknown MCP server 'maths'" in listing.failures[0].content


async def test_a_hanging_call_times_out_and_the_server_stays_usable(make_manager: Make) -> None:
    manager = make_manager({"calc": stdio("tools_server.py")})
    result = await manager.call("calc__hang", "{}", timeout=0.5)
    assert (result.status, result.content) == (
        "failure",
        "MCP tool calc__hang timed out after 0.5 s.",
    )
    assert (await manager.call("calc__add", '{"a": 1, "b": 1}')).content == "2.0"


async def test_ten_megabytes_come_back_capped(make_manager: Make) -> None:
    manager = make_manager({"calc": stdio("tools_server.py")})
    result = await manager.call("calc__big", '{"megabytes": 10}', timeout=120)
    assert result.status == "success"
    assert len(result.content) < OUTPUT_CAP + 200
    assert "characters cut from the middle" in result.content
    assert len(result.parts[0]["text"]) < OUTPUT_CAP + 200


async def test_images_are_kept_inline_or_written_where_asked(
    make_manager: Make, tmp_path: Path
) -> None:
    manager = make_manager({"calc": stdio("tools_server.py")})
    inline = await manager.call("calc__image", "{}")
    assert inline.status == "success"
    part = inline.parts[0]
    assert part["type"] == "image" and part["mime_type"] == "image/png"
    assert base64.b64decode(part["data"]).startswith(b"\x89PNG")
    saved = await manager.call("calc__image", "{}", files_dir=tmp_path / "out")
    path = Path(saved.parts[0]["filepath"])
    assert path.parent == tmp_path / "out" and path.suffix == ".png"
    assert path.read_bytes().startswith(b"\x89PNG")
    assert f"saved as {path}" in saved.content
    # in a workspace: named relative to it, for the model as for the stream (any runtime)
    inside = await manager.call(
        "calc__image", "{}", files_dir=tmp_path / "mcp_files", workspace=tmp_path
    )
    relative = inside.parts[0]["filepath"]
    assert relative.startswith("mcp_files/mcp_calc__image_") and relative.endswith(".png")
    assert (tmp_path / relative).read_bytes().startswith(b"\x89PNG")
    assert f"saved as {relative}" in inside.content and str(tmp_path) not in inside.content


async def test_stderr_lines_are_kept(make_manager: Make) -> None:
    manager = make_manager({"calc": stdio("tools_server.py")})
    await manager.call("calc__say", '{"text": "hello stderr"}')
    await await_until(
        lambda: "say: hello stderr" in manager.states()[0]["stderr"], "the stderr line"
    )
    assert manager.states()[0]["stderr"][0].startswith("tools server up")


async def test_a_server_that_exits_at_start_is_failed_with_its_reason(make_manager: Make) -> None:
    # no back-off: the call below starts it again (the back-off has a test of its own; with
    # one, whether the call came within it depended on the machine's speed)
    manager = make_manager(
        {"calc": stdio("tools_server.py"), "broken": stdio("exits_at_start.py")},
        restart_backoff=0,
    )
    listing = await manager.tools_for(None)
    assert {t.server for t in listing.tools} == {"calc"}
    (fault,) = listing.failures
    assert fault.status == "failure"
    assert "MCP server 'broken' could not start" in fault.content
    assert "fatal: TOKEN is not set" in fault.content
    state = {s["name"]: s for s in manager.states()}["broken"]
    assert state["state"] == "failed" and state["tools"] == []
    assert "closed the connection" in state["error"]
    assert state["stderr"] == ["starting the exits-at-start server", "fatal: TOKEN is not set"]
    called = await manager.call("broken__anything", "{}")
    assert called.status == "failure" and "'broken' could not start" in called.content


async def test_a_server_that_hangs_at_start_times_out_and_is_killed(
    make_manager: Make, tmp_path: Path
) -> None:
    pidfile = tmp_path / "pid"
    manager = make_manager({"stuck": stdio("hangs_at_start.py", str(pidfile))}, start_timeout=1)
    call = asyncio.create_task(manager.call("stuck__x", "{}"))
    await await_until(lambda: manager.states()[0]["state"] == "starting", "the start")
    assert manager.states()[0]["tools"] == [] and "error" not in manager.states()[0]
    result = await call
    assert result.status == "failure"
    assert "'stuck' could not start: did not answer within 1 s" in result.content
    assert "hanging at start" in result.content  # its last stderr line
    assert not alive(int(pidfile.read_text()))
    assert manager.states()[0]["state"] == "failed"


async def test_a_missing_command_is_named(make_manager: Make) -> None:
    manager = make_manager(
        {
            "ghost": {"command": "/nonexistent/mcp-server"},
            "typo": {"command": "planact-no-such-mcp-server", "args": ["--stdio"]},
        }
    )
    result = await manager.call("ghost__x", "{}")
    assert "'ghost' could not start: command not found: /nonexistent/mcp-server" in result.content
    typo = await manager.call("typo__x", "{}")  # looked up on PATH: still named
    assert (
        "'typo' could not start: command not found: planact-no-such-mcp-server "
        "(No such file or directory)"
    ) in typo.content
    assert {s["name"]: s for s in manager.states()}["typo"]["error"] == (
        "command not found: planact-no-such-mcp-server (No such file or directory)"
    )


async def test_failed_starts_back_off_bounded_and_never_give_up(make_manager: Make) -> None:
    now = [1000.0]
    manager = make_manager(
        {"broken": stdio("exits_at_start.py")}, restart_backoff=10, clock=lambda: now[0]
    )
    assert "could not start" in (await manager.call("broken__x", "{}")).content
    waiting = await manager.call("broken__x", "{}")
    assert "MCP server 'broken' is down (" in waiting.content
    assert "next attempt in 10 s" in waiting.content
    assert manager._servers["broken"].starts == 1
    waits = []
    for attempt in range(2, 9):  # the waits double up to BACKOFF_MAX, and it is tried again
        now[0] += 1000
        await manager.call("broken__x", "{}")
        assert manager._servers["broken"].starts == attempt
        waits.append((await manager.call("broken__x", "{}")).content)
    assert "next attempt in 20 s" in waits[0] and "next attempt in 40 s" in waits[1]
    assert all(f"next attempt in {BACKOFF_MAX:.0f} s" in w for w in waits[2:])
    assert not any("given up" in w or "restart planact" in w for w in waits)


async def test_a_killed_server_is_started_again_on_next_use(make_manager: Make) -> None:
    manager = make_manager({"calc": stdio("tools_server.py")})
    first = await server_pid(manager, "calc")
    os.kill(first, signal.SIGKILL)
    await await_until(lambda: manager.states()[0]["state"] == "failed", "the death noticed")
    assert "closed the connection" in manager.states()[0]["error"]
    second = await server_pid(manager, "calc")
    assert second != first
    assert (await manager.call("calc__add", '{"a": 1, "b": 2}')).content == "3.0"


async def test_a_server_killed_during_a_call_is_a_failure_naming_it(make_manager: Make) -> None:
    manager = make_manager({"calc": stdio("tools_server.py")})
    pid = await server_pid(manager, "calc")
    call = asyncio.create_task(manager.call("calc__hang", "{}", timeout=60))
    await await_until(lambda: "hang: called" in manager.states()[0]["stderr"], "the call")
    os.kill(pid, signal.SIGKILL)
    result = await call
    assert result.status == "failure"
    assert "MCP server 'calc' stopped during the call to calc__hang" in result.content
    assert "was down" not in result.content
    assert (await manager.call("calc__add", '{"a": 1, "b": 2}')).content == "3.0"


async def test_aclose_stops_every_server_process(make_manager: Make) -> None:
    manager = make_manager(
        {"one": stdio("tools_server.py"), "two": stdio("tools_server.py", env={"X": "1"})}
    )
    pids = [await server_pid(manager, "one"), await server_pid(manager, "two")]
    hung = asyncio.create_task(manager.call("one__hang", "{}", timeout=60))
    await await_until(lambda: "hang: called" in manager.states()[0]["stderr"], "the call")
    await manager.aclose()
    assert not any(alive(pid) for pid in pids)
    assert (await hung).status == "failure"
    after = await manager.call("one__add", "{}")
    assert after.status == "failure" and "closed" in after.content
    assert sys.executable  # the servers ran on this interpreter


async def test_concurrent_first_uses_start_the_server_once(make_manager: Make) -> None:
    manager = make_manager({"calc": stdio("tools_server.py")})
    results = await asyncio.gather(
        manager.tools_for(["calc"]),
        manager.call("calc__add", '{"a": 1, "b": 2}'),
        manager.call("calc__pid", "{}"),
    )
    assert results[1].content == "3.0"
    assert manager._servers["calc"].starts == 1


async def test_resources_come_back_as_parts(make_manager: Make, tmp_path: Path) -> None:
    manager = make_manager({"calc": stdio("tools_server.py")})
    result = await manager.call("calc__report", "{}", files_dir=tmp_path)
    assert result.status == "success"
    text, note, blob, link = result.parts
    assert text == {"type": "text", "text": "see the attachments"}
    assert note == {
        "type": "resource",
        "uri": "mem://notes.txt",
        "mime_type": None,
        "text": "a note",
    }
    assert blob["type"] == "resource" and blob["uri"] == "mem://logo.png"
    assert Path(blob["filepath"]).read_bytes().startswith(b"\x89PNG")
    assert link == {
        "type": "resource_link",
        "uri": "https://example.org/doc",
        "name": "doc",
        "mime_type": None,
    }
    assert result.content.splitlines()[:2] == ["see the attachments", "a note"]
    assert "[resource link https://example.org/doc (doc)]" in result.content


async def test_a_caller_that_gives_up_during_the_start_leaves_nothing_running(
    make_manager: Make, tmp_path: Path
) -> None:
    pidfile = tmp_path / "pid"
    manager = make_manager({"stuck": stdio("hangs_at_start.py", str(pidfile))})
    call = asyncio.create_task(manager.call("stuck__x", "{}"))
    await await_until(lambda: pidfile.exists() and pidfile.read_text() != "", "the process")
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert not alive(int(pidfile.read_text()))


async def test_aclose_during_a_start_leaves_nothing_running(
    make_manager: Make, tmp_path: Path
) -> None:
    pidfile = tmp_path / "pid"
    manager = make_manager({"stuck": stdio("hangs_at_start.py", str(pidfile))})
    call = asyncio.create_task(manager.call("stuck__x", "{}"))
    await await_until(lambda: pidfile.exists() and pidfile.read_text() != "", "the process")
    await manager.aclose()
    assert not alive(int(pidfile.read_text()))
    result = await call
    assert result.status == "failure" and "closed" in result.content


# plays the server: runs one tool call on the server's event loop (uvloop, as uvicorn runs
# it) and prints the stdio server's open descriptors
UVLOOP_SERVER = """
import json, sys, uvloop
from backend.tools.mcp import McpManager, parse_servers
async def main():
    manager = McpManager(parse_servers(json.loads(sys.argv[1])), call_timeout=30.0)
    try:
        result = await manager.call("calc__fds", "{}")
        print(result.status, result.content)
    finally:
        await manager.aclose()
uvloop.run(main())
"""


async def test_a_stdio_server_sees_no_descriptor_of_the_servers() -> None:
    read, write = os.pipe()
    inherited = [os.dup2(read, 200), os.dup2(write, 201)]  # inheritable, like a parent's
    servers = json.dumps({"mcpServers": {"calc": stdio("tools_server.py")}})
    try:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            UVLOOP_SERVER,
            servers,
            cwd=Path(__file__).parents[3],
            pass_fds=inherited,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await proc.communicate()
    finally:
        for fd in (read, write, *inherited):
            os.close(fd)
    assert proc.returncode == 0, err.decode()
    status, *fds = out.decode().split()
    assert status == "success"
    assert fds[:3] == ["0", "1", "2"]
    assert "200" not in fds and "201" not in fds
