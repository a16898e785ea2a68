"""Runs that wait for a person across processes (docs/deploy.md, docs/api.md "Runs that wait for a
person"), black-box:
two `planact serve` replicas (and a queue worker) on PostgreSQL, the fake model over HTTP.
A waiting run holds no process: any replica answers it, it survives a restart of every
process, two answers racing on two replicas are decided once, and it holds no worker slot."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.agent.scripts import finish, plan_reply, run
from tests.e2e.cluster import Worker, follow, messages, open_running, start_json
from tests.e2e.server import Server, server_env
from tests.e2e.waiting import MARKER_COMMAND, conversation, decide, finals, markers, pending
from tests.fakellm import FakeModelServer
from tests.pg import postgres_url, reset

pytestmark = pytest.mark.e2e

LEASE = 4.0


def _env(tmp: Path, fake: FakeModelServer, **extra: str) -> dict[str, str]:
    url = postgres_url()
    reset(url)
    return server_env(tmp, fake.base_url, DATABASE_URL=url, LEASE_SECONDS=str(LEASE), **extra)


@pytest.fixture
def replicas(tmp_path: Path, fake_model_server: FakeModelServer) -> Iterator[list[Server]]:
    env = _env(tmp_path, fake_model_server, EXECUTOR="inline")
    servers = [Server(tmp_path, env).start(60), Server(tmp_path, env).start(60)]
    try:
        yield servers
    finally:
        for s in servers:
            s.stop()


def _script(fake: FakeModelServer, runs: int = 1) -> None:
    fake.script(
        *[{"stage": "planning", "content": plan_reply("Mark")} for _ in range(runs)],
        *[{"stage": "thinking", "content": run(MARKER_COMMAND)} for _ in range(runs)],
        *[{"stage": "thinking", "content": finish("marked")} for _ in range(runs)],
    )


def _completed_once(server: Server, tmp: Path, cid: str, rid: str) -> list[dict[str, Any]]:
    msgs, end = follow(server, rid)
    assert end is not None and end["status"] == "completed"
    assert markers(tmp, cid) == ["ran\n"]  # exactly once
    stored = messages(server, cid)
    assert open_running(stored) == []
    done = [(m["uuid"], m["status"]) for m in stored if m["status"] != "running"]
    assert len(done) == len(set(done))  # nothing duplicated
    return msgs


def test_a_run_waiting_on_one_replica_is_approved_on_the_other_and_goes_on_there(
    tmp_path: Path, replicas: list[Server], fake_model: FakeModelServer
) -> None:
    a, b = replicas
    _script(fake_model)
    ids = start_json(a, {"goal": "mark it", "approval": "risky"}).json()
    rid, cid = ids["run_id"], ids["conversation_id"]
    asked = pending(b, cid)
    (row,) = conversation(b, cid)["runs"]
    assert row["status"] == "waiting" and row["owner"] is None  # held by no process
    assert markers(tmp_path, cid) == []
    assert decide(b, rid, asked["uuid"], {"decision": "approve"}).status_code == 200
    _completed_once(a, tmp_path, cid, rid)
    (row,) = conversation(a, cid)["runs"]
    assert f"-{b.proc.pid}-" in row["owner"]  # type: ignore[union-attr]
    assert row["resumes"] == 0  # an answer is not a crash


def test_a_waiting_run_survives_a_restart_of_every_process_and_is_approved_after(
    tmp_path: Path, replicas: list[Server], fake_model: FakeModelServer
) -> None:
    a, b = replicas
    _script(fake_model)
    ids = start_json(a, {"goal": "mark it", "approval": "risky"}).json()
    rid, cid = ids["run_id"], ids["conversation_id"]
    asked = pending(a, cid)
    a.kill9()
    b.stop()
    replicas[:] = [Server(tmp_path, a.env).start(60), Server(tmp_path, b.env).start(60)]
    c, d = replicas
    assert conversation(c, cid)["runs"][0]["status"] == "waiting"
    assert pending(d, cid)["uuid"] == asked["uuid"]
    assert markers(tmp_path, cid) == []
    assert decide(d, rid, asked["uuid"], {"decision": "approve"}).status_code == 200
    _completed_once(c, tmp_path, cid, rid)


def test_two_answers_racing_on_two_replicas_are_decided_once(
    tmp_path: Path, replicas: list[Server], fake_model: FakeModelServer
) -> None:
    a, b = replicas
    races = 10
    _script(fake_model, races)
    started = [
        start_json(a, {"goal": f"mark {i}", "approval": "risky"}).json() for i in range(races)
    ]
    asked = [pending(b, ids["conversation_id"]) for ids in started]

    def answer_both(i: int) -> list[int]:
        rid, uuid = started[i]["run_id"], asked[i]["uuid"]
        with ThreadPoolExecutor(2) as pool:
            calls = [
                pool.submit(_post, s, rid, uuid, {"decision": d})
                for s, d in ((a, "approve"), (b, "reject" if i % 2 else "approve"))
            ]
            return sorted(c.result() for c in calls)

    for i in range(races):
        assert answer_both(i) == [200, 409], i
    for ids, question in zip(started, asked, strict=True):
        rid, cid = ids["run_id"], ids["conversation_id"]
        msgs, end = follow(a, rid)
        assert end is not None and end["status"] == "completed"
        (partner,) = finals(msgs, question["uuid"])
        ran = markers(tmp_path, cid)
        # the winner decided: approved, the command ran once; rejected, never
        assert ran == (["ran\n"] if partner["status"] == "success" else []), partner
        assert open_running(messages(a, cid)) == []


def _post(server: Server, rid: str, uuid: str, body: dict[str, str]) -> int:
    with httpx.Client(base_url=server.url, timeout=60) as c:
        return c.post(f"/api/agent/runs/{rid}/approvals/{uuid}", json=body).status_code


def test_a_waiting_run_holds_no_worker_slot(tmp_path: Path, fake_model: FakeModelServer) -> None:
    env = _env(tmp_path, fake_model, EXECUTOR="queue", WORKER_CONCURRENCY="1")
    server = Server(tmp_path, env).start(60)
    worker = Worker(tmp_path, env, "only").start()
    try:
        fake_model.script(
            {"stage": "planning", "content": plan_reply("Mark")},
            {"stage": "planning", "content": plan_reply("Other")},
            {"stage": "thinking", "content": run(MARKER_COMMAND)},
            {"stage": "thinking", "content": finish("second")},
            {"stage": "thinking", "content": finish("first")},
        )
        first = start_json(server, {"goal": "mark it", "approval": "risky"}).json()
        asked = pending(server, first["conversation_id"])
        second = start_json(server, {"goal": "something else"}).json()
        _msgs, end = follow(server, second["run_id"])  # the one worker slot is free
        assert end is not None and end["status"] == "completed"
        assert conversation(server, first["conversation_id"])["runs"][0]["status"] == "waiting"
        assert (
            decide(server, first["run_id"], asked["uuid"], {"decision": "approve"}).status_code
            == 200
        )
        _completed_once(server, tmp_path, first["conversation_id"], first["run_id"])
    finally:
        worker.stop()
        server.stop()


def test_the_embedded_set_up_keeps_a_run_waiting_across_a_kill9_and_restart(
    tmp_path: Path, fake_model: FakeModelServer
) -> None:
    env = server_env(tmp_path, fake_model.base_url)  # SQLite, inline: the default
    first = Server(tmp_path, env).start()
    try:
        _script(fake_model)
        ids = start_json(first, {"goal": "mark it", "approval": "risky"}).json()
        rid, cid = ids["run_id"], ids["conversation_id"]
        asked = pending(first, cid)
        first.kill9()
    finally:
        first.stop()
    again = Server(tmp_path, env).start()
    try:
        assert conversation(again, cid)["runs"][0]["status"] == "waiting"
        assert markers(tmp_path, cid) == []
        assert decide(again, rid, asked["uuid"], {"decision": "approve"}).status_code == 200
        _completed_once(again, tmp_path, cid, rid)
    finally:
        again.stop()
