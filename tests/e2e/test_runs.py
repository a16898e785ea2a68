"""Black-box: the real server in a subprocess, real litellm, the fake model over HTTP."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.agent.scripts import finish, plan_reply, run, write
from tests.e2e.server import Server, running_server, server_env, wait_for
from tests.fakellm import FakeModelServer
from tests.pg import postgres_url, reset
from tests.procs import alive
from tests.shapes import MESSAGE_KEYS, META_KEYS
from tests.sse_client import collect, iter_events

pytestmark = pytest.mark.e2e

TRICKY = 'x = "a < b && c > d" # & \'single\' "double" &amp; <tag attr="v">\n'


def kinds(messages: list[dict[str, Any]]) -> list[str]:
    return [m["meta"]["action_type"] for m in messages]


@pytest.mark.parametrize(
    ("stream", "database"), [("true", "sqlite"), ("false", "sqlite"), ("true", "postgresql")]
)
def test_two_task_run_full_order_and_shapes(
    tmp_path: Path, fake_model: FakeModelServer, stream: str, database: str
) -> None:
    db_env = {}
    if database == "postgresql":
        db_env["DATABASE_URL"] = postgres_url()
        reset(db_env["DATABASE_URL"])
    fake_model.script(
        {"stage": "route", "content": '{"task_type": "code_generation", "needs_tools": true}'},
        {"stage": "planning", "content": plan_reply("Write", "Run", prose="Two steps.")},
        {"stage": "thinking", "content": write("src/tricky.py", TRICKY) + finish("wrote it")},
        {
            "stage": "thinking",
            "content": "<think>now run it</think>\n"
            + run("python3 src/tricky.py; echo ok > ran.txt")
            + finish("ran it"),
        },
        {"stage": "summary", "content": "Summary: wrote and ran **tricky.py**."},
    )
    with running_server(tmp_path, fake_model.base_url, LLM_STREAM=stream, **db_env) as server:
        messages, end, headers = server.run({"goal": "Please handle my request"})
        cid, rid = headers["x-conversation-id"], headers["x-run-id"]
        assert end == {"conversation_id": cid, "run_id": rid, "status": "completed"}
        assert kinds(messages) == [
            "question",
            "auto_reply",
            "plan",
            "task",
            "write_code",
            "write_code",
            "finish",
            "task",
            "task",
            "thinking",
            "terminal_run",
            "terminal_run",
            "finish",
            "task",
            "finish_summery",
        ]
        for m in messages:
            assert list(m) == MESSAGE_KEYS
            assert list(m["meta"]) == META_KEYS
            assert (m["conversation_id"], m["run_id"]) == (cid, rid)
        assert (
            messages[0]["role"] == "user" and messages[0]["content"] == "Please handle my request"
        )
        plan = messages[2]["meta"]["json"]
        assert [t["title"] for t in plan] == ["Write", "Run"]
        assert all(set(t) == {"id", "title", "description", "requirement", "status"} for t in plan)
        assert all(t["status"] == "pending" for t in plan)
        assert messages[3]["meta"]["task_id"] == plan[0]["id"]
        assert messages[8]["meta"]["task_id"] == plan[1]["id"]
        assert messages[9]["content"] == "now run it"
        assert messages[-1]["content"] == "Summary: wrote and ran **tricky.py**."
        files = {f["filepath"]: f for f in messages[-1]["meta"]["json"]}
        assert set(files) == {"src/tricky.py", "ran.txt"}
        assert files["src/tricky.py"] == {
            "filepath": "src/tricky.py",
            "filename": "tricky.py",
            "url": f"/api/files/{cid}/src/tricky.py",
            "filesize": len(TRICKY.encode()),
        }
        with server.client() as c:
            got = c.get(files["src/tricky.py"]["url"])
            assert got.status_code == 200
            assert got.content == TRICKY.encode()
            assert "attachment" in got.headers["content-disposition"]
            stored = c.get(f"/api/conversations/{cid}/messages").json()
            assert stored == messages
            listing = c.get(f"/api/conversations/{cid}/files").json()
            assert {f["filepath"] for f in listing} == {"src/tricky.py", "ran.txt"}
            conv = c.get(f"/api/conversations/{cid}").json()
            assert conv["usage"]["stages"]["thinking"]["calls"] == 2
            assert conv["prompt_tokens"] == 5 * 11
    calls = fake_model.model.calls
    assert [c["stage"] for c in calls] == ["route", "planning", "thinking", "thinking", "summary"]
    assert all(c["stream"] is (stream == "true") for c in calls)
    assert all(c["authorization"] == "Bearer sk-fake" for c in calls)


def test_stop_kills_the_running_command(tmp_path: Path, fake_model: FakeModelServer) -> None:
    pidfile = tmp_path / "child.pid"
    command = (
        "python3 -c \"import os,time; open('" + str(pidfile) + "','w').write(str(os.getpid()));"
        ' time.sleep(600)"'
    )
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Wait forever")},
        {"stage": "thinking", "content": run(command)},
    )
    with (
        # the command writes its host pid to a host file: unsandboxed (bubblewrap's kill on
        # stop: tests/runtime/test_contract.py, local-bwrap)
        running_server(tmp_path, fake_model.base_url, LOCAL_SANDBOX="off") as server,
        server.client() as c,
        c.stream("POST", "/api/agent/run", json={"goal": "run a script"}) as resp,
    ):
        rid = resp.headers["x-run-id"]
        seen: list[dict[str, Any]] = []
        end = None
        for ev in iter_events(resp.iter_lines()):
            if ev.event == "end":
                end = ev.json
                break
            if ev.event == "delta":  # live output: this test follows the stored messages
                continue
            msg = ev.json
            seen.append(msg)
            if msg["meta"]["action_type"] == "terminal_run" and msg["status"] == "running":
                pid = int(wait_for(lambda: pidfile.exists() and pidfile.read_text(), what="pid"))
                os.kill(pid, 0)  # alive
                with server.client() as c2:
                    assert c2.post(f"/api/agent/runs/{rid}/stop").status_code == 202
        assert end is not None and end["status"] == "stopped"
        assert "stop" in kinds(seen)
        assert kinds(seen)[-1] == "finish_summery"
        wait_for(lambda: not alive(pid), what="the command to be killed")
        conv = c.get(f"/api/conversations/{end['conversation_id']}").json()
        assert conv["status"] == "stopped"


def test_reattach_after_hangup_has_no_gap_and_no_duplicate(
    tmp_path: Path, fake_model: FakeModelServer
) -> None:
    fake_model.script(
        {"stage": "planning", "content": plan_reply("One", "Two")},
        {"stage": "thinking", "content": write("a.txt", "a\n") + finish("a")},
        {"stage": "thinking", "content": write("b.txt", "b\n") + finish("b"), "hold": "second"},
        {"stage": "summary", "content": "done"},
    )
    with running_server(tmp_path, fake_model.base_url) as server, server.client() as c:
        started = c.post(
            "/api/agent/run", json={"goal": "write code"}, headers={"Accept": "application/json"}
        )
        assert started.status_code == 202
        ids = started.json()
        rid, cid = ids["run_id"], ids["conversation_id"]
        first: list[dict[str, Any]] = []
        with c.stream("GET", f"/api/agent/runs/{rid}/events") as resp:
            for ev in iter_events(resp.iter_lines()):
                if ev.event == "delta":  # never replayed: the stored messages are compared
                    continue
                first.append(ev.json)
                if (
                    ev.json["meta"]["action_type"] == "task"
                    and ev.json["status"] == "running"
                    and len([m for m in first if m["meta"]["action_type"] == "task"]) == 3
                ):
                    break  # hang up mid-run, while the model holds the second reply
        fake_model.release("second")
        last = first[-1]["seq"]
        with c.stream(
            "GET", f"/api/agent/runs/{rid}/events", headers={"Last-Event-ID": str(last)}
        ) as resp:
            rest, end = collect(resp.iter_lines())
        assert end is not None and end["status"] == "completed"
        combined = first + rest
        assert [m["seq"] for m in combined] == sorted({m["seq"] for m in combined})
        assert combined == c.get(f"/api/conversations/{cid}/messages").json()
        # ?after= works the same, and a full replay from 0 equals the store
        with c.stream("GET", f"/api/agent/runs/{rid}/events?after={last}") as resp:
            again, _ = collect(resp.iter_lines())
        assert again == rest
        with c.stream("GET", f"/api/agent/runs/{rid}/events") as resp:
            replay, end2 = collect(resp.iter_lines())
        assert replay == combined and end2 == end


def test_kill9_mid_run_then_restart_continues_the_run_and_loses_nothing(
    tmp_path: Path, fake_model: FakeModelServer
) -> None:
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Hang")},
        {"stage": "thinking", "content": finish("never"), "hold": "never"},
    )
    env = server_env(tmp_path, fake_model.base_url)
    server = Server(tmp_path, env).start()
    try:
        with server.client() as c:
            ids = c.post(
                "/api/agent/run",
                json={"goal": "write code"},
                headers={"Accept": "application/json"},
            ).json()
            cid, rid = ids["conversation_id"], ids["run_id"]
            wait_for(
                lambda: any(
                    m["meta"]["action_type"] == "task"
                    for m in c.get(f"/api/conversations/{cid}/messages").json()
                ),
                what="the task to start",
            )
            before = c.get(f"/api/conversations/{cid}/messages").json()
        server.kill9()
    finally:
        server.stop()
    fake_model.release("never")
    # the run goes on at the restart from its last step: the model call in flight again
    fake_model.script({"stage": "thinking", "content": finish("fine")})
    server2 = Server(tmp_path, env, port=server.port).start()
    try:
        with server2.client() as c:
            with c.stream("GET", f"/api/agent/runs/{rid}/events") as resp:
                replay, end = collect(resp.iter_lines())
            assert end is not None and end["status"] == "completed"
            after = c.get(f"/api/conversations/{cid}/messages").json()
            assert after[: len(before)] == before
            tail = after[len(before) :]
            assert kinds(tail) == ["finish", "task", "finish_summery"]
            assert tail[0]["content"] == "fine"
            conv = c.get(f"/api/conversations/{cid}").json()
            assert conv["status"] == "completed"
            assert [r["status"] for r in conv["runs"]] == ["completed"]
            assert conv["runs"][0]["resumes"] == 1 and conv["runs"][0]["repeated_calls"] == 1
            assert replay == after
        fake_model.script(
            {"stage": "planning", "content": plan_reply("Again")},
            {"stage": "thinking", "content": finish("fine")},
        )
        messages, end, _ = server2.run({"goal": "write code", "conversation_id": cid})
        assert end["status"] == "completed"
        assert messages[0]["seq"] == after[-1]["seq"] + 1
    finally:
        server2.stop()


def test_path_escapes_by_write_read_and_download(
    tmp_path: Path, fake_model: FakeModelServer
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Escape")},
        {"stage": "thinking", "content": write("../../../escape.txt", "x\n")},
        {"stage": "thinking", "content": write(str(outside / "abs.txt"), "x\n")},
        {"stage": "thinking", "content": "<read_file><path>/etc/passwd</path></read_file>"},
        {
            "stage": "thinking",
            "content": run(f"ln -s {outside} link && ln -s {outside}/secret.txt s"),
        },
        {"stage": "thinking", "content": "<read_file><path>link/secret.txt</path></read_file>"},
        {"stage": "thinking", "content": write("link/planted.txt", "x\n")},
        {"stage": "thinking", "content": write("s", "overwritten\n")},
        {"stage": "thinking", "content": write("/workspace/ok.txt", "fine\n") + finish("done")},
    )
    with running_server(tmp_path, fake_model.base_url) as server:
        messages, end, headers = server.run({"goal": "write code"})
        cid = headers["x-conversation-id"]
        results = [
            m
            for m in messages
            if m["meta"]["action_type"] in ("write_code", "read_file") and m["status"] != "running"
        ]
        assert [m["status"] for m in results] == ["failure"] * 6 + ["success"]
        assert all("outside the workspace" in m["content"] for m in results[:6])
        assert "secret" not in results[4]["content"]
        assert not list(tmp_path.rglob("escape.txt"))
        assert not (outside / "abs.txt").exists() and not (outside / "planted.txt").exists()
        assert (outside / "secret.txt").read_text() == "secret"
        assert end["status"] == "completed"
        with server.client() as c:
            assert c.get(f"/api/files/{cid}/ok.txt").content == b"fine\n"
            for bad in ("link/secret.txt", "s", "..%2F..%2Fplanact.db", "%2Fetc%2Fpasswd"):
                r = c.get(f"/api/files/{cid}/{bad}")
                assert r.status_code == 404, bad
                assert r.json()["error"]["code"] == "not_found"
            raw = httpx.get(f"{server.url}/api/files/{cid}/../../../planact.db")
            assert raw.status_code == 404
