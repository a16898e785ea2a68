"""Runs outlive their process (docs/deploy.md, docs/api.md "Runs that wait for a person"),
black-box: real `planact serve`
processes, real PostgreSQL or the embedded SQLite file, the fake model over HTTP. The owner
is killed with -9 while a model call is in flight; another process (or the next start)
continues the run from its last step."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from tests.agent.scripts import finish, plan_reply, run
from tests.e2e.cluster import follow, messages, open_running, start_json
from tests.e2e.server import Server, server_env, wait_for
from tests.fakellm import FakeModelServer
from tests.pg import postgres_url, reset
from tests.support.runtime import require_docker
from tests.support.sandboxes import remove_sandboxes_under

pytestmark = pytest.mark.e2e

LEASE = 4.0
APPEND = run("echo ran >> count.log")


def kinds(msgs: list[dict[str, Any]]) -> list[str]:
    return [m["meta"]["action_type"] for m in msgs]


def script_with_a_call_in_flight(fake_model: FakeModelServer) -> None:
    """Task one: the first thinking call is held (the owner dies while it waits); the call
    made again appends a line to count.log; then the task finishes."""
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Count")},
        {"stage": "thinking", "content": APPEND, "hold": "in-flight"},
        {"stage": "thinking", "content": APPEND},
        {"stage": "thinking", "content": finish("counted")},
    )


def thinking_calls(fake_model: FakeModelServer) -> int:
    return sum(c["stage"] == "thinking" for c in fake_model.model.calls)


def check_completed_once(server: Server, tmp: Path, cid: str, rid: str) -> dict[str, Any]:
    msgs, end = follow(server, rid)
    assert end is not None and end["status"] == "completed", kinds(msgs)
    stored = messages(server, cid)
    assert open_running(stored) == []
    finals = [(m["uuid"], m["status"]) for m in stored if m["status"] != "running"]
    assert len(finals) == len(set(finals))  # nothing duplicated
    for once in ("question", "plan", "finish", "finish_summery"):
        assert kinds(stored).count(once) == 1, (once, kinds(stored))
    logs = [p for p in (tmp / "workspace").rglob("count.log") if cid in str(p)]
    assert [p.read_text() for p in logs] == ["ran\n"]  # the command ran once
    with server.client() as c:
        (row,) = c.get(f"/api/conversations/{cid}").json()["runs"]
    assert row["status"] == "completed" and row["resumes"] == 1
    assert row["repeated_calls"] == 1  # the call in flight, made again
    return cast(dict[str, Any], row)


@pytest.fixture
def inline_pair(tmp_path: Path, fake_model_server: FakeModelServer) -> Iterator[list[Server]]:
    url = postgres_url()
    reset(url)
    env = server_env(
        tmp_path,
        fake_model_server.base_url,
        DATABASE_URL=url,
        EXECUTOR="inline",
        LEASE_SECONDS=str(LEASE),
    )
    servers = [Server(tmp_path, env).start(), Server(tmp_path, env).start()]
    try:
        yield servers
    finally:
        for s in servers:
            s.stop()


def test_kill9_of_the_server_that_owns_a_run_hands_it_to_the_other_server(
    tmp_path: Path, inline_pair: list[Server], fake_model: FakeModelServer
) -> None:
    a, b = inline_pair
    script_with_a_call_in_flight(fake_model)
    ids = start_json(a, {"goal": "write code"}).json()
    rid, cid = ids["run_id"], ids["conversation_id"]
    wait_for(lambda: thinking_calls(fake_model) == 1, what="the model call to be in flight")
    a.kill9()
    row = check_completed_once(b, tmp_path, cid, rid)
    assert row["owner"].startswith("serve-") and f"-{a.proc.pid}-" not in row["owner"]  # type: ignore[union-attr]
    assert thinking_calls(fake_model) == 3


def test_the_embedded_set_up_resumes_its_run_at_the_next_start(
    tmp_path: Path, fake_model: FakeModelServer
) -> None:
    env = server_env(tmp_path, fake_model.base_url)  # SQLite, inline: the default
    first = Server(tmp_path, env).start()
    script_with_a_call_in_flight(fake_model)
    try:
        ids = start_json(first, {"goal": "write code"}).json()
        rid, cid = ids["run_id"], ids["conversation_id"]
        wait_for(lambda: thinking_calls(fake_model) == 1, what="the model call to be in flight")
        first.kill9()
    finally:
        first.stop()
    again = Server(tmp_path, env).start()
    try:
        check_completed_once(again, tmp_path, cid, rid)
    finally:
        again.stop()


@pytest.mark.docker
def test_kill9_mid_command_in_a_docker_sandbox_goes_on_in_a_sandbox_of_the_other_server(
    tmp_path: Path, fake_model_server: FakeModelServer, fake_model: FakeModelServer
) -> None:
    """The new owner finds the workspace as it was and makes its own sandbox for it; the
    command that was running is not run again."""
    require_docker()
    url = postgres_url()
    reset(url)
    env = server_env(
        tmp_path,
        fake_model.base_url,
        DATABASE_URL=url,
        LEASE_SECONDS=str(LEASE),
        RUNTIME="docker",
    )
    a, b = Server(tmp_path, env).start(), Server(tmp_path, env).start()
    try:
        fake_model.script(
            {"stage": "planning", "content": plan_reply("Count")},
            {"stage": "thinking", "content": run("echo ran >> count.log; sleep 600")},
            {"stage": "thinking", "content": run("cat count.log")},
            {"stage": "thinking", "content": finish("counted")},
        )
        ids = start_json(a, {"goal": "write code"}).json()
        rid, cid = ids["run_id"], ids["conversation_id"]

        def logs() -> list[Path]:
            return [p for p in (tmp_path / "workspace").rglob("count.log") if cid in str(p)]

        wait_for(logs, timeout=120, what="the command to run in the sandbox")
        a.kill9()
        msgs, end = follow(b, rid)
        assert end is not None and end["status"] == "completed", kinds(msgs)
        stored = messages(b, cid)
        assert open_running(stored) == []
        commands = [m for m in stored if m["meta"]["action_type"] == "terminal_run"]
        assert [m["status"] for m in commands] == ["running", "failure", "running", "success"]
        assert commands[1]["content"].startswith("Interrupted:")
        assert "ran" in commands[3]["content"]  # the workspace, seen from the new sandbox
        assert [p.read_text() for p in logs()] == ["ran\n"]
    finally:
        a.stop()
        b.stop()
        remove_sandboxes_under(tmp_path)
