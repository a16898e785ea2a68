"""Runs that wait for a person (docs/api.md "Runs that wait for a person"), black-box: real
`planact serve`
processes, the embedded SQLite set-up, the fake model over HTTP. An action that needs
approval runs only after it, exactly once; a rejection and its reason reach the model."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.agent.scripts import finish, plan_reply, run, write
from tests.e2e.cluster import follow, messages, open_running, start_json
from tests.e2e.server import Server, server_env, wait_for
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
from tests.sse_client import collect

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
    (item,) = asked["meta"]["json"]
    assert {k: item[k] for k in ("action_type", "class", "params")} == {
        "action_type": "terminal_run",
        "class": "terminal",
        "params": {"command": MARKER_COMMAND},
    }
    assert item["digest"].startswith("sha256:")  # what runs is what was shown (its own test)
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


def _mark_script(fake_model: FakeModelServer) -> None:
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Mark")},
        {"stage": "thinking", "content": run(MARKER_COMMAND)},
        {"stage": "thinking", "content": finish("done")},
    )


def test_stop_of_a_waiting_run_closes_its_approval_and_ends_it_stopped(
    tmp_path: Path, server: Server, fake_model: FakeModelServer
) -> None:
    _mark_script(fake_model)
    ids = start_json(server, {"goal": "mark it", "approval": "risky"}).json()
    rid, cid = ids["run_id"], ids["conversation_id"]
    asked = pending(server, cid)
    with server.client() as c:
        assert c.post(f"/api/agent/runs/{rid}/stop").status_code == 202
    msgs, end = follow(server, rid)
    assert end is not None and end["status"] == "stopped"
    (partner,) = finals(msgs, asked["uuid"])
    assert partner["status"] == "failure"
    kinds = [m["meta"]["action_type"] for m in msgs]
    assert "stop" in kinds and kinds[-1] == "finish_summery"
    assert open_running(messages(server, cid)) == []
    assert conversation(server, cid)["runs"][0]["status"] == "stopped"
    assert listed_status(server, cid) == "stopped"
    late = decide(server, rid, asked["uuid"], {"decision": "approve"})
    assert late.status_code == 409 and late.json()["error"]["code"]
    assert markers(tmp_path, cid) == []


def test_delete_of_a_waiting_conversation_leaves_nothing_to_resume(
    tmp_path: Path, server: Server, fake_model: FakeModelServer
) -> None:
    _mark_script(fake_model)
    ids = start_json(server, {"goal": "mark it", "approval": "risky"}).json()
    rid, cid = ids["run_id"], ids["conversation_id"]
    asked = pending(server, cid)
    with server.client() as c:
        assert c.delete(f"/api/conversations/{cid}").status_code in (200, 204)
        assert c.get(f"/api/conversations/{cid}").status_code == 404
    assert decide(server, rid, asked["uuid"], {"decision": "approve"}).status_code == 404
    assert markers(tmp_path, cid) == []
    assert not [p for p in (tmp_path / "workspace").rglob("*") if cid in str(p)]


def test_a_waiting_run_is_the_conversations_active_run(
    server: Server, fake_model: FakeModelServer
) -> None:
    _mark_script(fake_model)
    ids = start_json(server, {"goal": "mark it", "approval": "risky"}).json()
    rid, cid = ids["run_id"], ids["conversation_id"]
    asked = pending(server, cid)
    again = start_json(server, {"goal": "another", "conversation_id": cid})
    assert again.status_code == 409
    with server.client() as c:
        up = c.post(f"/api/conversations/{cid}/files", files={"file": ("a.txt", b"x")})
    assert up.status_code == 409
    assert decide(server, rid, asked["uuid"], {"decision": "reject"}).status_code == 200
    _msgs, end = follow(server, rid)
    assert end is not None and end["status"] == "completed"


def test_an_unanswered_approval_times_out_with_a_reason_the_model_reads(
    tmp_path: Path, fake_model: FakeModelServer
) -> None:
    env = server_env(tmp_path, fake_model.base_url, APPROVAL_TIMEOUT="1", LEASE_SECONDS="3")
    s = Server(tmp_path, env).start()
    try:
        _mark_script(fake_model)
        ids = start_json(s, {"goal": "mark it", "approval": "risky"}).json()
        rid, cid = ids["run_id"], ids["conversation_id"]
        asked = pending(s, cid)
        msgs, end = follow(s, rid)  # the sweep rejects it; the run goes on and ends
        assert end is not None and end["status"] == "completed"
        (partner,) = finals(msgs, asked["uuid"])
        assert partner["status"] == "failure" and "APPROVAL_TIMEOUT" in partner["content"]
        assert "rejected: Nobody approved it within 1 seconds" in seen_by_model(fake_model)
        assert markers(tmp_path, cid) == []
        assert decide(s, rid, asked["uuid"], {"decision": "approve"}).status_code == 409
    finally:
        s.stop()


def test_every_bad_answer_is_a_clear_json_error_and_changes_nothing(
    tmp_path: Path, fake_model: FakeModelServer
) -> None:
    token, other = "t-alice-0123456789", "t-bob-0123456789"
    env = server_env(
        tmp_path,
        fake_model.base_url,
        AUTH_TOKEN=token,
        AUTH_TOKENS=f"bob:{other}",
        ALLOW_SHARED_LOCAL="1",
    )
    s = Server(tmp_path, env).start()
    alice = {"Authorization": f"Bearer {token}"}
    bob = {"Authorization": f"Bearer {other}"}
    try:
        fake_model.script(
            {"stage": "planning", "content": plan_reply("Mark")},
            {"stage": "thinking", "content": run(MARKER_COMMAND)},
            {"stage": "thinking", "content": finish("done")},
        )
        with s.client(headers=alice) as c:
            ids = c.post(
                "/api/agent/run",
                json={"goal": "mark it", "approval": "risky"},
                headers={"Accept": "application/json"},
            ).json()
            rid, cid = ids["run_id"], ids["conversation_id"]
            bad_mode = c.post("/api/agent/run", json={"goal": "x", "approval": "sometimes"})
            assert bad_mode.status_code == 400 and "approval" in bad_mode.json()["error"]["message"]

            def find() -> dict[str, object] | None:
                msgs = c.get(f"/api/conversations/{cid}/messages").json()
                return next((m for m in msgs if m["meta"]["action_type"] == "approval"), None)

            asked = wait_for(find, timeout=60, what="the approval message")
            uuid = str(asked["uuid"])
            question = next(
                m["uuid"]
                for m in c.get(f"/api/conversations/{cid}/messages").json()
                if m["meta"]["action_type"] == "question"
            )

            def state() -> tuple[str, int]:
                conv = c.get(f"/api/conversations/{cid}").json()
                count = len(c.get(f"/api/conversations/{cid}/messages").json())
                return conv["runs"][0]["status"], count

            before = state()
            assert before[0] == "waiting"
            approvals = f"/api/agent/runs/{rid}/approvals"
            answers = f"/api/agent/runs/{rid}/answers"
            cases = [
                (f"{approvals}/{uuid}", {"decision": "maybe"}, 400),
                (f"{approvals}/{uuid}", {}, 400),
                (f"{approvals}/{uuid}", {"decision": "reject", "reason": "x" * 4001}, 400),
                (f"{approvals}/{uuid}", {"decision": "reject", "reason": 7}, 400),
                (f"{approvals}/{uuid}", [1, 2], 400),
                (f"{approvals}/nosuchuuid", {"decision": "approve"}, 404),
                (f"{approvals}/{question}", {"decision": "approve"}, 404),  # not an approval
                (f"/api/agent/runs/nosuchrun/approvals/{uuid}", {"decision": "approve"}, 404),
                (f"/api/agent/runs/{'x' * 80}/approvals/{uuid}", {"decision": "approve"}, 404),
                (f"{answers}/{uuid}", {"answer": "yes"}, 404),  # an approval is not a question
                (f"{answers}/{uuid}", {"answer": ""}, 400),
                (f"{answers}/{uuid}", {"answer": ["no"]}, 400),
            ]
            for path, body, status in cases:
                got = c.post(path, json=body)
                assert got.status_code == status, (path, body, got.text)
                error = got.json()["error"]
                assert error["code"] and error["message"], got.text
            bad_json = c.post(
                f"{approvals}/{uuid}",
                content=b"{not json",
                headers={"Content-Type": "application/json"},
            )
            assert bad_json.status_code == 400 and bad_json.json()["error"]["message"]
            assert c.post(f"{approvals}/{uuid}", content=b"decision=approve").status_code == 415
            with s.client(headers=bob) as b:  # another user's run: unknown to bob
                got = b.post(f"{approvals}/{uuid}", json={"decision": "approve"})
                assert got.status_code == 404, got.text
            assert state() == before
            assert markers(tmp_path, cid) == []
            # the answer that counts, then a second one: 409, nothing changed
            assert c.post(f"{approvals}/{uuid}", json={"decision": "reject"}).status_code == 200
            second = c.post(f"{approvals}/{uuid}", json={"decision": "approve"})
            assert second.status_code == 409 and second.json()["error"]["message"]
            with c.stream("GET", f"/api/agent/runs/{rid}/events") as r:
                _msgs, end = collect(r.iter_lines())
            assert end is not None and end["status"] == "completed"
            after = c.post(f"{approvals}/{uuid}", json={"decision": "approve"})
            assert after.status_code == 409  # the run is not waiting any more
            assert markers(tmp_path, cid) == []
    finally:
        s.stop()
