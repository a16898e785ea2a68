"""MCP servers in runs, black-box: the real `planact serve`, the fake model over HTTP and
real MCP servers written with the SDK. A broken server is the operator's problem: a quiet
notice in a run that picked it, never an `mcp_tool` card the model did not cause; results
show for what they are (an image saved in the workspace, named relative to it, for the
model too); a long tool's progress streams as live output of its running card."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.agent.scripts import finish, plan_reply
from tests.e2e.server import Server, running_server
from tests.fakellm import FakeModelServer
from tests.sse_client import Event, iter_events

pytestmark = pytest.mark.e2e

SERVERS = Path(__file__).resolve().parent.parent / "tools" / "mcp" / "servers"
ROUTE = {"stage": "route", "content": '{"task_type": "code_generation", "needs_tools": true}'}


def mcp_file(tmp_path: Path) -> Path:
    path = tmp_path / "mcp.json"
    servers = {
        "calc": {"command": sys.executable, "args": [str(SERVERS / "tools_server.py")]},
        "broken": {"command": sys.executable, "args": [str(SERVERS / "exits_at_start.py")]},
    }
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def notices(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in messages if m["meta"]["action_type"] == "thinking" and m["type"] == "notice"]


def of_kind(messages: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [m for m in messages if m["meta"]["action_type"] == kind]


def test_a_server_that_dies_at_start_is_one_quiet_notice_in_runs_that_picked_it(
    tmp_path: Path, fake_model: FakeModelServer
) -> None:
    fake_model.script(
        # a run of two tasks that calls no MCP tool, with every server (no pick)
        ROUTE,
        {"stage": "planning", "content": plan_reply("First", "Second")},
        {"stage": "thinking", "content": finish("first done")},
        {"stage": "thinking", "content": finish("second done")},
        {"stage": "summary", "content": "Both done."},
        # a later run with every server: the same, not "given up" as a failure
        ROUTE,
        {"stage": "planning", "content": plan_reply("Again")},
        {"stage": "thinking", "content": finish("done again")},
        # a run that picked only the working server: nothing about the broken one
        ROUTE,
        {"stage": "planning", "content": plan_reply("Calc only")},
        {"stage": "thinking", "content": finish("done")},
    )
    env = {"MCP_SERVERS_FILE": str(mcp_file(tmp_path)), "WEB_FETCH": "0"}
    with running_server(tmp_path, fake_model.base_url, **env) as server:
        first, end1, _ = server.run({"goal": "Do two things"})
        second, end2, _ = server.run({"goal": "Do it again"})
        third, end3, _ = server.run({"goal": "Only calc", "mcp_servers": ["calc"]})
        with server.client() as c:
            states = {s["name"]: s for s in c.get("/api/mcp/servers").json()}
    assert [e["status"] for e in (end1, end2, end3)] == ["completed"] * 3
    for run in (first, second, third):
        assert of_kind(run, "mcp_tool") == []  # the model called no MCP tool: no card
        assert [m for m in run if m["status"] == "failure"] == []  # nothing looks broken
    for run in (first, second):
        (notice,) = notices(run)  # once per run, even over two tasks
        assert notice["status"] == "success" and notice["meta"]["task_id"]
        assert "MCP server 'broken'" in notice["content"]
        assert "given up" not in notice["content"]
    assert "TOKEN is not set" in notices(first)[0]["content"]  # its last stderr line
    assert notices(third) == []
    # the operator's view: the broken server failed, with why and its stderr
    assert states["calc"]["state"] == "ready"
    assert states["broken"]["state"] == "failed"
    assert states["broken"]["stderr"][-1] == "fatal: TOKEN is not set"


def read_run(
    server: Server, body: dict[str, Any], on_event: Any = None
) -> tuple[list[Event], dict[str, Any]]:
    with server.client() as c, c.stream("POST", "/api/agent/run", json=body) as resp:
        assert resp.status_code == 200, resp.read()
        events = []
        for ev in iter_events(resp.iter_lines()):
            events.append(ev)
            if on_event is not None:
                on_event(ev)
            if ev.event == "end":
                break
        return events, dict(resp.headers)


def test_an_image_is_saved_in_the_workspace_and_progress_streams_live(
    tmp_path: Path, fake_model: FakeModelServer
) -> None:
    gate = tmp_path / "gate"
    steps = json.dumps({"count": 3, "gate": str(gate)})
    fake_model.script(
        ROUTE,
        {"stage": "planning", "content": plan_reply("Draw and count")},
        {
            "stage": "thinking",
            "content": "<mcp_tool><name>calc__image</name><arguments>{}</arguments></mcp_tool>",
        },
        {
            "stage": "thinking",
            "content": f"<mcp_tool><name>calc__steps</name><arguments>{steps}</arguments>"
            "</mcp_tool>",
        },
        {"stage": "thinking", "content": finish("drawn and counted")},
    )

    def on_event(ev: Event) -> None:  # the tool goes on once its progress was seen live
        if ev.event == "delta" and ev.json["action_type"] == "mcp_tool":
            gate.touch()

    env = {"MCP_SERVERS_FILE": str(mcp_file(tmp_path)), "WEB_FETCH": "0"}
    with running_server(tmp_path, fake_model.base_url, **env) as server:
        events, headers = read_run(
            server, {"goal": "Draw", "mcp_servers": ["calc"]}, on_event=on_event
        )
        assert events[-1].json["status"] == "completed"
        cid = headers["x-conversation-id"]
        messages = [e.json for e in events if e.event == "message"]
        image_msg, steps_msg = [
            m for m in of_kind(messages, "mcp_tool") if m["status"] != "running"
        ]
        (part,) = image_msg["meta"]["json"][0]["parts"]
        with server.client() as c:
            saved = c.get(f"/api/files/{cid}/{part['filepath']}")
    # the image: one field, `filepath`, relative to the workspace, and the file is there
    assert part["type"] == "image" and part["mime_type"] == "image/png"
    assert part["filepath"].startswith("mcp_files/") and part["filepath"].endswith(".png")
    assert saved.status_code == 200 and saved.content.startswith(b"\x89PNG")
    # the model reads the same relative path, never the host's absolute one
    thinking = [c["messages"] for c in fake_model.model.calls if c["stage"] == "thinking"]
    after_image = "\n".join(str(m.get("content") or "") for m in thinking[1])
    assert f"saved as {part['filepath']}" in after_image
    assert str(tmp_path / "workspace") not in after_image

    # progress: live output of the running card, before its final message, never stored
    running = next(
        m for m in messages if m["uuid"] == steps_msg["uuid"] and m["status"] == "running"
    )
    kinds = [(e.event, e.json.get("uuid"), e.json.get("status")) for e in events[:-1]]
    final_at = kinds.index(("message", steps_msg["uuid"], "success"))
    deltas = [e.json for e in events[:final_at] if e.event == "delta"]
    progress = [d for d in deltas if d["uuid"] == running["uuid"]]
    assert progress and all(d["action_type"] == "mcp_tool" for d in progress)
    assert all(d["stream"] == "stdout" for d in progress)
    assert "".join(d["text"] for d in progress) == (
        "1/3: step 1 of 3\n2/3: step 2 of 3\n3/3: step 3 of 3\n"
    )
    assert steps_msg["content"] == "3 steps done"
