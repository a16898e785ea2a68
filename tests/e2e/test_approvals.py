"""Runs that wait for a person (CONTRACT section 10), black-box: real `planact serve`
processes, the embedded SQLite set-up, the fake model over HTTP. An action that needs
approval runs only after it, exactly once; a rejection and its reason reach the model."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.agent.scripts import finish, plan_reply, run, write
from tests.e2e.cluster import follow, messages, start_json
from tests.e2e.server import Server, server_env
from tests.e2e.waiting import (
    MARKER_COMMAND,
    answer,
    conversation,
    decide,
    finals,
    listed_status,
    markers,
    pending,
    seen_by_model,
)
from tests.fakellm import FakeModelServer

pytestmark = pytest.mark.e2e


@pytest.fixture
def server(tmp_path: Path, fake_model: FakeModelServer) -> Iterator[Server]:
    env = server_env(tmp_path, fake_model.base_url, APPROVAL_MODE="never")
    s = Server(tmp_path, env).start()
    try:
        yield s
    finally:
        s.stop()


def test_a_command_runs_only_after_its_approval_and_exactly_once(
    tmp_path: Path, server: Server, fake_model: FakeModelServer
) -> None:
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Mark")},
        {"stage": "thinking", "content": run(MARKER_COMMAND)},
        {"stage": "thinking", "content": finish("marked")},
    )
    ids = start_json(server, {"goal": "mark it", "approval": "risky"}).json()
    rid, cid = ids["run_id"], ids["conversation_id"]
    asked = pending(server, cid)
    assert asked["content"] == MARKER_COMMAND
    assert asked["meta"]["json"] == [
        {"action_type": "terminal_run", "class": "terminal", "params": {"command": MARKER_COMMAND}}
    ]
    # waiting: nothing ran, the run and the conversation say so
    assert markers(tmp_path, cid) == []
    (row,) = conversation(server, cid)["runs"]
    assert row["status"] == "waiting" and row["approval"] == "risky"
    assert listed_status(server, cid) == "waiting"
    assert markers(tmp_path, cid) == []
    got = decide(server, rid, asked["uuid"], {"decision": "approve"})
    assert got.status_code == 200 and got.json() == {"decision": "approve"}
    msgs, end = follow(server, rid)
    assert end is not None and end["status"] == "completed"
    assert markers(tmp_path, cid) == ["ran\n"]
    (partner,) = finals(msgs, asked["uuid"])
    assert partner["status"] == "success" and partner["content"] == "Approved"
    runs = [m for m in msgs if m["meta"]["action_type"] == "terminal_run"]
    assert [m["status"] for m in runs] == ["running", "success"]
    assert runs[0]["seq"] > partner["seq"]  # it ran after the approval
    assert listed_status(server, cid) == "completed"


def test_a_rejection_and_its_reason_reach_the_model_and_the_action_never_runs(
    tmp_path: Path, server: Server, fake_model: FakeModelServer
) -> None:
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Mark")},
        {"stage": "thinking", "content": run(MARKER_COMMAND) + "\n" + run("echo later > l.txt")},
        {"stage": "thinking", "content": finish("gave up")},
    )
    ids = start_json(server, {"goal": "mark it", "approval": "always"}).json()
    rid, cid = ids["run_id"], ids["conversation_id"]
    asked = pending(server, cid)
    got = decide(server, rid, asked["uuid"], {"decision": "reject", "reason": "not on Fridays"})
    assert got.status_code == 200 and got.json() == {"decision": "reject"}
    msgs, end = follow(server, rid)
    assert end is not None and end["status"] == "completed"
    assert markers(tmp_path, cid) == []
    (partner,) = finals(msgs, asked["uuid"])
    assert partner["status"] == "failure" and partner["content"] == "not on Fridays"
    assert "rejected by the person: not on Fridays" in seen_by_model(fake_model)
    # the later action of the same reply was skipped, as after any failure
    assert not any(
        m["meta"]["action_type"] == "approval" and m["uuid"] != asked["uuid"] for m in msgs
    )
    assert not list((tmp_path / "workspace").rglob("l.txt"))


def test_approve_all_lets_every_later_action_of_that_class_run_without_asking(
    tmp_path: Path, server: Server, fake_model: FakeModelServer
) -> None:
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Mark")},
        {"stage": "thinking", "content": run(MARKER_COMMAND)},
        {"stage": "thinking", "content": run(MARKER_COMMAND) + "\n" + write("a.txt", "hello\n")},
        {"stage": "thinking", "content": finish("marked twice")},
    )
    ids = start_json(server, {"goal": "mark it", "approval": "always"}).json()
    rid, cid = ids["run_id"], ids["conversation_id"]
    asked = pending(server, cid)
    assert decide(server, rid, asked["uuid"], {"decision": "approve_all"}).status_code == 200
    edit = pending(server, cid)  # the edit still asks: another class
    assert edit["uuid"] != asked["uuid"] and edit["meta"]["filepath"] == "a.txt"
    assert (
        edit["content"].startswith("--- a/a.txt\n+++ b/a.txt\n") and "+hello\n" in edit["content"]
    )
    assert markers(tmp_path, cid) == ["ran\nran\n"]
    assert decide(server, rid, edit["uuid"], {"decision": "approve"}).status_code == 200
    msgs, end = follow(server, rid)
    assert end is not None and end["status"] == "completed"
    approvals = [
        m for m in msgs if m["meta"]["action_type"] == "approval" and m["status"] == "running"
    ]
    assert len(approvals) == 2
    (partner,) = finals(msgs, asked["uuid"])
    assert partner["content"] == "Approved, with every later terminal action of this run"


def test_a_question_is_answered_through_the_api_and_the_answer_reaches_the_model(
    server: Server, fake_model: FakeModelServer
) -> None:
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Ask")},
        {"stage": "thinking", "content": "<ask_user><question>Which colour?</question></ask_user>"},
        {"stage": "thinking", "content": finish("blue it is")},
    )
    ids = start_json(server, {"goal": "paint it"}).json()
    rid, cid = ids["run_id"], ids["conversation_id"]
    asked = pending(server, cid, "ask_user")
    assert asked["content"] == "Which colour?"
    assert conversation(server, cid)["runs"][0]["status"] == "waiting"
    got = answer(server, rid, asked["uuid"], {"answer": "Blue, please"})
    assert got.status_code == 200 and got.json() == {"answer": "Blue, please"}
    msgs, end = follow(server, rid)
    assert end is not None and end["status"] == "completed"
    (partner,) = finals(msgs, asked["uuid"])
    assert partner["status"] == "success" and partner["content"] == "Blue, please"
    assert "Blue, please" in seen_by_model(fake_model)
    system = next(c for c in fake_model.model.calls if c["stage"] == "thinking")["messages"][0]
    assert "<ask_user>" in system["content"] and "cannot find yourself" in system["content"]
    assert len(messages(server, cid)) == len(msgs)
