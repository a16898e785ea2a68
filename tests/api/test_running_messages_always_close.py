"""An honest stream (docs/api.md "The stream"): every `running` message gets its final partner,
whatever ends the run. Through the ASGI app with a ScriptedLLM and the local runtime."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from starlette.testclient import TestClient

from backend.app import create_app
from backend.config import Settings
from backend.llm.base import LLMError
from backend.llm.testing import ScriptedLLM
from tests.agent.scripts import finish, plan_reply, run
from tests.sse_client import collect


def unpartnered(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Running messages with no final partner (same uuid; for tasks, same task id)."""

    def key(m: dict[str, Any]) -> str:
        at = m["meta"]["action_type"]
        return f"task:{m['meta']['task_id']}" if at == "task" else m["uuid"]

    open_: dict[str, dict[str, Any]] = {}
    for m in messages:
        if m["status"] == "running":
            open_[key(m)] = m
        else:
            open_.pop(key(m), None)
    return list(open_.values())


def wait_for_message(client: TestClient, cid: str, pred: Any, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for m in client.get(f"/api/conversations/{cid}/messages").json():
            if pred(m):
                return m
        time.sleep(0.02)
    raise AssertionError("timed out waiting for the message")


def start(client: TestClient, goal: str) -> tuple[str, str]:
    r = client.post(
        "/api/agent/run",
        json={"goal": goal, "mode": "agent"},
        headers={"Accept": "application/json"},
    )
    assert r.status_code == 202, r.text
    return r.json()["conversation_id"], r.json()["run_id"]


def is_running_command(m: dict[str, Any]) -> bool:
    return bool(m["meta"]["action_type"] == "terminal_run" and m["status"] == "running")


def test_stop_during_a_command_closes_the_command_and_the_task(settings: Settings) -> None:
    llm = ScriptedLLM(
        [("planning", plan_reply("Wait")), ("thinking", run("echo started; sleep 600"))]
    )
    with TestClient(create_app(settings, llm=llm)) as client:
        cid, rid = start(client, "run a long command")
        running = wait_for_message(client, cid, is_running_command)
        assert client.post(f"/api/agent/runs/{rid}/stop").status_code == 202
        with client.stream("GET", f"/api/agent/runs/{rid}/events") as resp:
            messages, end = collect(resp.iter_lines())
    assert llm.errors == []
    assert end is not None and end["status"] == "stopped"
    assert unpartnered(messages) == []
    kinds = [m["meta"]["action_type"] for m in messages]
    assert kinds[-5:] == ["terminal_run", "terminal_run", "task", "stop", "finish_summery"]
    closed = messages[-4]
    assert closed["uuid"] == running["uuid"]
    assert closed["status"] == "failure"
    assert closed["content"].startswith("Stopped before it finished.")
    assert closed["meta"]["content"] == running["meta"]["content"]
    task = messages[-3]
    assert task["status"] == "failure" and task["meta"]["json"][0]["status"] == "failed"


def test_a_model_error_mid_task_closes_the_task_before_the_error(settings: Settings) -> None:
    llm = ScriptedLLM(
        [("planning", plan_reply("One")), ("thinking", LLMError("the provider is down"))]
    )
    with TestClient(create_app(settings, llm=llm)) as client:
        _cid, rid = start(client, "write code")
        with client.stream("GET", f"/api/agent/runs/{rid}/events") as resp:
            messages, end = collect(resp.iter_lines())
    assert end is not None and end["status"] == "failed"
    assert unpartnered(messages) == []
    kinds = [m["meta"]["action_type"] for m in messages]
    assert kinds[-3:] == ["task", "error", "finish_summery"]
    assert "the provider is down" in messages[-2]["content"]


def test_shutdown_during_a_command_hands_the_run_to_the_next_start(tmp_path: Path) -> None:
    """The server shuts down while a command runs: the run is handed over, not failed; the
    next start continues it. The command is not run again: its `running` message gets its
    `failure` partner saying it was interrupted, and the model reads that."""
    from tests.support.settings import make_settings

    settings = make_settings(tmp_path)
    llm = ScriptedLLM(
        [("planning", plan_reply("Wait")), ("thinking", run("echo started; sleep 600"))]
    )
    with TestClient(create_app(settings, llm=llm)) as client:
        cid, _rid = start(client, "run a long command")
        wait_for_message(client, cid, is_running_command)
    # the lifespan ended (server shutdown) while the command ran; the next start goes on
    after = ScriptedLLM([("thinking", finish("gave up waiting"))])
    with TestClient(create_app(settings, llm=after)) as client:
        wait_for_message(client, cid, lambda m: m["meta"]["action_type"] == "finish_summery")
        messages = client.get(f"/api/conversations/{cid}/messages").json()
        conv = client.get(f"/api/conversations/{cid}").json()
    assert unpartnered(messages) == []
    assert conv["status"] == "completed" and conv["runs"][0]["resumes"] == 1
    command = [m for m in messages if m["meta"]["action_type"] == "terminal_run"]
    assert [m["status"] for m in command] == ["running", "failure"]
    assert command[1]["content"].startswith("Interrupted:")
    assert "Interrupted" in after.calls[0].messages[-1]["content"]
    assert "error" not in [m["meta"]["action_type"] for m in messages]
