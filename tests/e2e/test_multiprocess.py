"""Black-box: two `planact serve` and two `planact worker` on one PostgreSQL
(EXECUTOR=queue), the fake model over HTTP; plus two processes on one SQLite file."""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.agent.scripts import finish, plan_reply, run, write
from tests.e2e.cluster import (
    Worker,
    follow,
    messages,
    open_running,
    run_status,
    start_json,
)
from tests.e2e.server import Server, server_env, wait_for
from tests.fakellm import FakeModelServer
from tests.pg import postgres_url, reset
from tests.procs import alive
from tests.sse_client import iter_events

pytestmark = pytest.mark.e2e

LEASE = 4.0


def kinds(msgs: list[dict[str, Any]]) -> list[str]:
    return [m["meta"]["action_type"] for m in msgs]


def sleeper(pidfile: Path) -> str:
    return run(
        "python3 -c \"import os,time; open('" + str(pidfile) + "','w').write(str(os.getpid()));"
        ' time.sleep(600)"'
    )


class Cluster:
    def __init__(self, tmp: Path, model_url: str) -> None:
        url = postgres_url()
        reset(url)
        self.tmp = tmp
        self.env = server_env(
            tmp,
            model_url,
            DATABASE_URL=url,
            EXECUTOR="queue",
            LEASE_SECONDS=str(LEASE),
            SHUTDOWN_GRACE="5",
            # sleeper() writes a host pid to a host file: commands run unsandboxed here
            # (bubblewrap's kill on stop: tests/runtime/test_contract.py, local-bwrap)
            LOCAL_SANDBOX="off",
        )
        self.servers = [Server(tmp, self.env), Server(tmp, self.env)]
        self.workers = [Worker(tmp, self.env, "w1"), Worker(tmp, self.env, "w2")]

    def start(self) -> Cluster:
        # the first process applies the schemas; the others start together
        self.servers[0].start()
        for w in self.workers:
            w.start()
        self.servers[1].start()
        return self

    def stop(self) -> None:
        for p in [*self.servers, *self.workers]:
            p.stop()

    def worker_of(self, server: Server, cid: str) -> Worker:
        with server.client() as c:
            owner = c.get(f"/api/conversations/{cid}").json()["runs"][-1]["owner"]
        pid = int(owner.split("-")[-2])
        for w in self.workers:
            if w.proc is not None and w.proc.pid == pid:
                return w
        raise AssertionError(f"run owner {owner} is not one of the workers")


@pytest.fixture(scope="module")
def cluster(
    tmp_path_factory: pytest.TempPathFactory, fake_model_server: FakeModelServer
) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("cluster"), fake_model_server.base_url).start()
    try:
        yield c
    finally:
        c.stop()


def test_reader_on_the_other_replica_gets_every_message_promptly(
    cluster: Cluster, fake_model: FakeModelServer
) -> None:
    a, b = cluster.servers
    fake_model.script(
        {"stage": "planning", "content": plan_reply("One", "Two")},
        {"stage": "thinking", "content": write("a.txt", "a\n") + finish("a"), "hold": "h1"},
        {"stage": "thinking", "content": write("b.txt", "b\n") + finish("b"), "hold": "h2"},
        {"stage": "summary", "content": "done"},
    )
    started = start_json(a, {"goal": "write code"})
    assert started.status_code == 202, started.text
    rid, cid = started.json()["run_id"], started.json()["conversation_id"]
    lags: list[float] = []
    seen: list[dict[str, Any]] = []
    end = None
    with b.client() as c, c.stream("GET", f"/api/agent/runs/{rid}/events") as resp:
        for ev in iter_events(resp.iter_lines()):
            if ev.event == "end":
                end = ev.json
                break
            if ev.event == "delta":  # live output: this test follows the stored messages
                continue
            msg = ev.json
            lags.append(time.time() - msg["timestamp"] / 1000)
            seen.append(msg)
            # the holds make the run go in steps: each step must reach this reader at once
            if msg["meta"]["action_type"] == "task" and msg["status"] == "running":
                fake_model.release(
                    "h1" if len([m for m in seen if m["status"] == "running"]) == 1 else "h2"
                )
    assert end is not None and end["status"] == "completed"
    assert seen == messages(a, cid) == messages(b, cid)
    # the old 5 s store polling delivered in bursts (median 2.5 s late, spread over the 5 s):
    # now each message arrives by notification. The median, not the worst: on a loaded
    # machine a few deliveries wait for a core (2.2 s seen at load average 13), while
    # polling would put half of them over 2 s.
    assert statistics.median(lags) < 1.0, sorted(lags)


def test_stop_via_the_other_replica_ends_the_run_and_its_command(
    cluster: Cluster, fake_model: FakeModelServer, tmp_path: Path
) -> None:
    a, b = cluster.servers
    pidfile = tmp_path / "child.pid"
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Wait")},
        {"stage": "thinking", "content": sleeper(pidfile)},
    )
    ids = start_json(a, {"goal": "write code"}).json()
    rid = ids["run_id"]
    pid = int(wait_for(lambda: pidfile.exists() and pidfile.read_text(), what="the command"))
    assert alive(pid)
    with b.client() as c:
        assert c.post(f"/api/agent/runs/{rid}/stop").status_code == 202
    # the stream's end is the event (how fast is bench/bench_runs.py's figure)
    msgs, end = follow(a, rid)
    assert end is not None and end["status"] == "stopped"
    assert kinds(msgs)[-2:] == ["stop", "finish_summery"]
    assert open_running(msgs) == []
    wait_for(lambda: not alive(pid), timeout=60, what="the command to be killed")


def test_restarting_an_api_replica_leaves_other_owners_runs_running(
    cluster: Cluster, fake_model: FakeModelServer
) -> None:
    a, b = cluster.servers
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Hold")},
        {"stage": "thinking", "content": write("x.txt", "x\n") + finish("x"), "hold": "r"},
    )
    ids = start_json(a, {"goal": "write code"}).json()
    rid, cid = ids["run_id"], ids["conversation_id"]
    wait_for(lambda: "task" in kinds(messages(b, cid)), what="the task to start")
    a.stop()
    a.start()
    assert run_status(b, cid) == ["running"]
    fake_model.release("r")
    msgs, end = follow(a, rid)
    assert end is not None and end["status"] == "completed"
    assert "error" not in kinds(msgs)


def test_kill9_of_a_worker_mid_command_hands_its_run_to_the_other_worker(
    cluster: Cluster, fake_model: FakeModelServer
) -> None:
    """The run is continued from its last step by the other worker (queued again), not
    failed: the command that was running is not run again, the model is told it was
    interrupted, every message is there once and none is left running."""
    a, b = cluster.servers
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Count")},
        {"stage": "thinking", "content": run("echo ran >> count.log; sleep 600")},
        {"stage": "thinking", "content": finish("counted")},
    )
    ids = start_json(a, {"goal": "write code"}).json()
    rid, cid = ids["run_id"], ids["conversation_id"]

    def logs() -> list[Path]:
        return [p for p in (cluster.tmp / "workspace").rglob("count.log") if cid in str(p)]

    def command_ran() -> bool:
        running = [m for m in messages(b, cid) if m["meta"]["action_type"] == "terminal_run"]
        return bool(running) and bool(logs())

    wait_for(command_ran, what="the command to run")
    victim = cluster.worker_of(a, cid)
    assert victim.proc is not None
    pid = victim.proc.pid
    victim.kill9()  # its process group: the command dies with it
    try:
        msgs, end = follow(b, rid)
        assert end is not None and end["status"] == "completed", kinds(msgs)
        stored = messages(a, cid)
        assert open_running(stored) == []
        finals = [(m["uuid"], m["status"]) for m in stored if m["status"] != "running"]
        assert len(finals) == len(set(finals))  # nothing duplicated
        assert kinds(stored).count("question") == 1 and kinds(stored).count("plan") == 1
        (command,) = [m for m in stored if m["meta"]["action_type"] == "terminal_run"][1:]
        assert command["status"] == "failure" and "Interrupted" in command["content"]
        assert [p.read_text() for p in logs()] == ["ran\n"]  # ran once
        thinking = [c for c in fake_model.model.calls if c["stage"] == "thinking"]
        assert len(thinking) == 2  # no model call made again: none was in flight
        assert "Interrupted" in thinking[1]["messages"][-1]["content"]
        with a.client() as c:
            (row,) = c.get(f"/api/conversations/{cid}").json()["runs"]
        assert row["resumes"] == 1 and row["repeated_calls"] == 0
        assert f"-{pid}-" not in row["owner"]
    finally:
        victim.proc = None
        cluster.workers[cluster.workers.index(victim)] = Worker(
            cluster.tmp, cluster.env, f"{victim.name}x"
        ).start()


def new_conversation(server: Server, fake_model: FakeModelServer) -> str:
    """A conversation with one finished run (the race then targets it)."""
    fake_model.script({"stage": "auto_reply", "content": "hi"})
    messages, end, headers = server.run({"goal": "hello", "mode": "chat"})
    assert end is not None and end["status"] == "completed", messages
    return str(headers["x-conversation-id"])


def race(servers: list[Server], cid: str, n: int = 30) -> list[int]:
    barrier = threading.Barrier(n)
    codes: list[int] = []

    def post(i: int) -> None:
        with httpx.Client(base_url=servers[i % len(servers)].url, timeout=60) as c:
            barrier.wait()
            r = c.post(
                "/api/agent/run",
                json={"goal": "write code", "conversation_id": cid},
                headers={"Accept": "application/json"},
            )
            codes.append(r.status_code)

    threads = [threading.Thread(target=post, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return codes


def test_thirty_racing_posts_give_exactly_one_run_on_postgresql(
    cluster: Cluster, fake_model: FakeModelServer
) -> None:
    a, b = cluster.servers
    cid = new_conversation(a, fake_model)
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Hold")},
        {"stage": "thinking", "content": finish("x"), "hold": "race"},
    )
    codes = race([a, b], cid)
    assert sorted(codes) == [202] + [409] * 29
    fake_model.release("race")
    wait_for(lambda: run_status(a, cid) == ["completed"] * 2, what="the one run to end")


def test_delete_via_the_other_replica_stops_the_run_first(
    cluster: Cluster, fake_model: FakeModelServer, tmp_path: Path
) -> None:
    a, b = cluster.servers
    pidfile = tmp_path / "child.pid"
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Wait")},
        {"stage": "thinking", "content": sleeper(pidfile)},
    )
    ids = start_json(a, {"goal": "write code"}).json()
    cid = ids["conversation_id"]
    pid = int(wait_for(lambda: pidfile.exists() and pidfile.read_text(), what="the command"))
    with b.client() as c:
        assert c.delete(f"/api/conversations/{cid}").status_code == 200
        assert c.get(f"/api/conversations/{cid}").status_code == 404
    assert not alive(pid)
    with a.client() as c:
        assert c.get(f"/api/conversations/{cid}/messages").status_code == 404
    for w in cluster.workers:
        assert "ForeignKeyViolation" not in w.log.read_text()


def test_a_new_run_is_refused_with_503_while_a_worker_shuts_down_gracefully(
    cluster: Cluster, fake_model: FakeModelServer
) -> None:
    """SIGTERM on a worker while the run's last model call is in flight: the run has no
    next step at which to be handed over, so it finishes there within the grace."""
    a, _ = cluster.servers
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Short")},
        {"stage": "thinking", "content": write("s.txt", "s\n") + finish("s"), "hold": "g"},
    )
    ids = start_json(a, {"goal": "write code"}).json()
    rid, cid = ids["run_id"], ids["conversation_id"]
    wait_for(
        lambda: any(c["stage"] == "thinking" for c in fake_model.model.calls),
        what="the last model call to be in flight",
    )
    worker = cluster.worker_of(a, cid)
    assert worker.proc is not None
    worker.proc.send_signal(15)
    fake_model.release("g")
    _, end = follow(a, rid)
    assert end is not None and end["status"] == "completed"
    assert worker.proc.wait(20) is not None
    cluster.workers[cluster.workers.index(worker)] = Worker(
        cluster.tmp, cluster.env, f"{worker.name}t"
    ).start()


# -- two processes on one SQLite file (the embedded mode) ---------------------------------
def test_thirty_racing_posts_on_two_processes_sharing_one_sqlite_file(
    tmp_path: Path, fake_model: FakeModelServer
) -> None:
    env = server_env(tmp_path, fake_model.base_url, LEASE_SECONDS=str(LEASE))
    a = Server(tmp_path, env).start()
    b = Server(tmp_path, env).start()
    try:
        cid = new_conversation(a, fake_model)
        fake_model.script(
            {"stage": "planning", "content": plan_reply("Hold")},
            {"stage": "thinking", "content": finish("x"), "hold": "race"},
        )
        codes = race([a, b], cid)
        assert sorted(codes) == [202] + [409] * 29
        fake_model.release("race")
        wait_for(lambda: run_status(b, cid) == ["completed"] * 2, what="the one run to end")
    finally:
        a.stop()
        b.stop()


def test_planact_run_on_the_same_sqlite_file_leaves_the_servers_run_alone(
    tmp_path: Path, fake_model: FakeModelServer
) -> None:
    import subprocess
    import sys

    env = server_env(tmp_path, fake_model.base_url)
    server = Server(tmp_path, env).start()
    try:
        fake_model.script(
            {"stage": "planning", "content": plan_reply("Hold")},
            {"stage": "thinking", "content": finish("server"), "hold": "srv"},
        )
        ids = start_json(server, {"goal": "write code"}).json()
        rid, cid = ids["run_id"], ids["conversation_id"]
        wait_for(lambda: "task" in kinds(messages(server, cid)), what="the task to start")
        fake_model.script(
            {"stage": "planning", "content": plan_reply("CLI")},
            {"stage": "thinking", "content": finish("cli")},
        )
        cli = subprocess.run(
            [str(Path(sys.executable).with_name("planact")), "run", "write code"],
            cwd=tmp_path,
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert cli.returncode == 0, cli.stdout + cli.stderr
        assert run_status(server, cid) == ["running"]
        assert "error" not in kinds(messages(server, cid))
        fake_model.release("srv")
        msgs, end = follow(server, rid)
        assert end is not None and end["status"] == "completed"
        assert "error" not in kinds(msgs)
    finally:
        server.stop()


def test_sigterm_lets_a_run_in_its_last_step_finish_and_refuses_new_runs(
    tmp_path: Path, fake_model: FakeModelServer
) -> None:
    """The run's last model call is in flight: it has no next step boundary at which to be
    handed over, so it finishes here within the grace."""
    env = server_env(tmp_path, fake_model.base_url, SHUTDOWN_GRACE="20")
    server = Server(tmp_path, env).start()
    try:
        fake_model.script(
            {"stage": "planning", "content": plan_reply("Short")},
            {"stage": "thinking", "content": write("s.txt", "s\n") + finish("s"), "hold": "g"},
        )
        with (
            server.client() as c,
            c.stream("POST", "/api/agent/run", json={"goal": "write code"}) as resp,
        ):
            lines = resp.iter_lines()
            events = iter_events(lines)
            for ev in events:
                if ev.event == "message" and ev.json["meta"]["action_type"] == "task":
                    break
            wait_for(
                lambda: any(c["stage"] == "thinking" for c in fake_model.model.calls),
                what="the last model call to be in flight",
            )
            assert server.proc is not None
            server.proc.send_signal(15)
            refused = wait_for(
                lambda: start_json(server, {"goal": "write code"}).status_code == 503,
                what="new runs to be refused",
            )
            assert refused
            fake_model.release("g")
            rest = list(events)
        assert rest[-1].event == "end" and rest[-1].json["status"] == "completed"
        assert server.proc.wait(20) is not None
    finally:
        server.stop()


def test_sigterm_of_a_lone_server_hands_its_run_to_its_next_start(
    tmp_path: Path, fake_model: FakeModelServer
) -> None:
    """The run's model call does not come back within SHUTDOWN_GRACE: the run is handed over
    where it is (not failed); the stream hangs up; the next start continues the run, making
    the call again."""
    env = server_env(tmp_path, fake_model.base_url, SHUTDOWN_GRACE="1")
    server = Server(tmp_path, env).start()
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Long")},
        {"stage": "thinking", "content": finish("never"), "hold": "long"},
        {"stage": "thinking", "content": finish("after the restart")},
    )
    try:
        ids = start_json(server, {"goal": "write code"}).json()
        rid, cid = ids["run_id"], ids["conversation_id"]
        with server.client() as c, c.stream("GET", f"/api/agent/runs/{rid}/events") as resp:
            assert server.proc is not None
            events = iter_events(resp.iter_lines())
            for ev in events:
                if ev.event == "message" and ev.json["meta"]["action_type"] == "task":
                    # the thinking call is under way (held by the model) when SIGTERM comes
                    wait_for(lambda: "long" in fake_model.model.holds, what="the held call")
                    server.proc.send_signal(15)
                    break
            rest = list(events)
        assert all(ev.event != "end" for ev in rest)  # hung up: the run did not end
        server.proc.wait(20)
    finally:
        server.stop()
        fake_model.release("long")
    again = Server(tmp_path, env).start()
    try:
        _, end = follow(again, rid)
        assert end is not None and end["status"] == "completed"
        stored = messages(again, cid)
        assert open_running(stored) == []
        assert "error" not in kinds(stored) and kinds(stored).count("question") == 1
        assert [m["content"] for m in stored if m["meta"]["action_type"] == "finish"] == [
            "after the restart"
        ]
        with again.client() as c:
            (row,) = c.get(f"/api/conversations/{cid}").json()["runs"]
        assert row["resumes"] == 1 and row["repeated_calls"] == 1
    finally:
        again.stop()


def test_sigterm_of_the_worker_running_a_run_hands_it_to_the_other_worker(
    cluster: Cluster, fake_model: FakeModelServer
) -> None:
    """At its next step (before its next model call) the run leaves the stopping worker;
    the other worker goes on with it: no model call made twice, no command run twice."""
    a, b = cluster.servers
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Count")},
        {"stage": "thinking", "content": run("echo ran >> turns.log"), "hold": "step"},
        {"stage": "thinking", "content": run("echo again >> turns.log")},
        {"stage": "thinking", "content": finish("counted")},
    )
    ids = start_json(a, {"goal": "write code"}).json()
    rid, cid = ids["run_id"], ids["conversation_id"]
    wait_for(lambda: "task" in kinds(messages(a, cid)), what="the task to start")
    worker = cluster.worker_of(a, cid)
    assert worker.proc is not None
    pid = worker.proc.pid
    worker.proc.send_signal(15)
    fake_model.release("step")
    try:
        msgs, end = follow(b, rid)
        assert end is not None and end["status"] == "completed", kinds(msgs)
        assert worker.proc.wait(20) is not None
        stored = messages(a, cid)
        assert open_running(stored) == [] and "error" not in kinds(stored)
        logs = [p for p in (cluster.tmp / "workspace").rglob("turns.log") if cid in str(p)]
        assert [p.read_text() for p in logs] == ["ran\nagain\n"]
        assert [c["stage"] for c in fake_model.model.calls].count("thinking") == 3
        with a.client() as c:
            (row,) = c.get(f"/api/conversations/{cid}").json()["runs"]
        assert row["resumes"] == 1 and row["repeated_calls"] == 0
        assert f"-{pid}-" not in row["owner"]
    finally:
        cluster.workers[cluster.workers.index(worker)] = Worker(
            cluster.tmp, cluster.env, f"{worker.name}h"
        ).start()
