"""Live deltas end to end (docs/api.md "The stream"): the real `planact serve`, the fake model
streaming over HTTP, real commands. Deltas arrive before the stored message, carry no id,
and are never replayed; command output streams while the command runs (both runtimes)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.agent.scripts import finish, plan_reply, run
from tests.e2e.server import Server, running_server
from tests.fakellm import FakeModelServer
from tests.sse_client import Event, iter_events
from tests.support.runtime import require_docker

pytestmark = pytest.mark.e2e

ANSWER = (
    "Paris is the capital of France. It sits on the Seine, has been the capital for most of "
    "the last thousand years, and is home to about two million people."
)

# prints a line, then waits (bounded) for a file the test creates once it saw that line live
WAIT_FOR_GO = (
    "echo first; echo oops >&2; "
    "for i in $(seq 600); do [ -f go ] && break; sleep 0.05; done; echo second"
)


def workspace(tmp: Path, cid: str) -> Path:
    return tmp / "workspace" / "user_1" / f"Conversation_{cid}"


def read_all(server: Server, method: str, url: str, **kw: Any) -> tuple[list[Event], Any]:
    with server.client() as c, c.stream(method, url, **kw) as resp:
        assert resp.status_code == 200, resp.read()
        events = []
        for ev in iter_events(resp.iter_lines()):
            events.append(ev)
            if ev.event == "end":
                break
        return events, resp.headers


def test_model_text_streams_before_its_message_and_is_never_replayed(
    tmp_path: Path, fake_model: FakeModelServer
) -> None:
    fake_model.script({"stage": "auto_reply", "content": ANSWER, "chunks": 24, "chunk_delay": 0.03})
    with running_server(tmp_path, fake_model.base_url) as server:
        events, headers = read_all(
            server, "POST", "/api/agent/run", json={"goal": "Capital of France?", "mode": "chat"}
        )
        kinds = [e.event for e in events]
        assert kinds[-1] == "end" and events[-1].json["status"] == "completed"
        reply_at = next(
            i
            for i, e in enumerate(events)
            if e.event == "message" and e.json["meta"]["action_type"] == "auto_reply"
        )
        reply = events[reply_at].json
        deltas = [e for e in events if e.event == "delta"]
        assert len(deltas) >= 2  # it streamed, in several pieces
        assert all(e.id is None for e in deltas)  # never an id: Last-Event-ID stays put
        assert all(e.json["uuid"] == reply["uuid"] for e in deltas)
        assert all(e.json["action_type"] == "auto_reply" for e in deltas)
        assert kinds.index("delta") < reply_at
        assert max(i for i, e in enumerate(events) if e.event == "delta") < reply_at
        assert "".join(e.json["text"] for e in deltas).strip() == reply["content"] == ANSWER
        # reattach after the end: the stored messages only, the same ones
        rid = headers["x-run-id"]
        replay, _ = read_all(server, "GET", f"/api/agent/runs/{rid}/events")
        assert [e.event for e in replay] == ["message", "message", "end"]
        assert [e.json for e in replay[:2]] == [e.json for e in events if e.event == "message"]
        # and from the middle: still no deltas
        replay, _ = read_all(server, "GET", f"/api/agent/runs/{rid}/events?after=1")
        assert [e.event for e in replay] == ["message", "end"]


def command_streams_live(tmp_path: Path, fake: FakeModelServer, runtime: str) -> None:
    fake.script(
        {"stage": "planning", "content": plan_reply("Print")},
        {
            "stage": "thinking",
            "content": "I'll print two lines.\n" + run(WAIT_FOR_GO) + finish("printed"),
        },
    )
    with (
        running_server(tmp_path, fake.base_url, RUNTIME=runtime) as server,
        server.client() as c,
        c.stream("POST", "/api/agent/run", json={"goal": "print lines", "mode": "agent"}) as resp,
    ):
        cid = resp.headers["x-conversation-id"]
        running: dict[str, Any] | None = None
        live = {"stdout": "", "stderr": ""}
        final = None
        narration_deltas = ""
        plan_prose = ""
        order: list[str] = []
        for ev in iter_events(resp.iter_lines()):
            if ev.event == "end":
                assert ev.json["status"] == "completed"
                break
            data = ev.json
            if ev.event == "delta":
                assert ev.id is None
                if data["action_type"] == "thinking":
                    narration_deltas += data["text"]
                    continue
                if data["action_type"] == "auto_reply":  # the planner's prose
                    plan_prose += data["text"]
                    continue
                assert running is not None and data["uuid"] == running["uuid"]
                assert final is None  # never after the final message
                live[data["stream"]] += data["text"]
                order.append(f"delta:{data['stream']}")
                if "first" in live["stdout"] and not (workspace(tmp_path, cid) / "go").exists():
                    # the command is still waiting for this file: it streamed while running
                    (workspace(tmp_path, cid) / "go").write_text("")
                continue
            if data["meta"]["action_type"] == "terminal_run":
                if data["status"] == "running":
                    running = data
                else:
                    final = data
                order.append(f"{data['meta']['action_type']}:{data['status']}")
    assert running is not None and final is not None
    assert live["stdout"] == "first\nsecond\n"
    assert live["stderr"] == "oops\n"
    assert final["status"] == "success"
    assert "first\nsecond" in final["content"] and "oops" in final["content"]
    assert order[0] == "terminal_run:running" and order[-1] == "terminal_run:success"
    assert narration_deltas.strip() == "I'll print two lines."
    assert plan_prose.strip() == "I'll do it."


def test_command_output_streams_while_it_runs_local(
    tmp_path: Path, fake_model: FakeModelServer
) -> None:
    command_streams_live(tmp_path, fake_model, "local")


@pytest.mark.docker
def test_command_output_streams_while_it_runs_docker(
    tmp_path: Path, fake_model: FakeModelServer
) -> None:
    require_docker()
    command_streams_live(tmp_path, fake_model, "docker")


def test_stopped_command_keeps_its_output(tmp_path: Path, fake_model: FakeModelServer) -> None:
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Wait")},
        {"stage": "thinking", "content": run("echo partial; sleep 600")},
    )
    with (
        running_server(tmp_path, fake_model.base_url) as server,
        server.client() as c,
        c.stream("POST", "/api/agent/run", json={"goal": "wait", "mode": "agent"}) as resp,
    ):
        rid = resp.headers["x-run-id"]
        messages = []
        stopped = False
        for ev in iter_events(resp.iter_lines()):
            if ev.event == "end":
                assert ev.json["status"] == "stopped"
                break
            if ev.event == "delta" and "partial" in ev.json["text"] and not stopped:
                stopped = True
                assert c.post(f"/api/agent/runs/{rid}/stop").status_code == 202
            if ev.event == "message":
                messages.append(ev.json)
    command = [m for m in messages if m["meta"]["action_type"] == "terminal_run"]
    assert [m["status"] for m in command] == ["running", "failure"]
    assert command[1]["content"].startswith("Stopped before it finished.")
    assert "partial" in command[1]["content"]
    assert stopped


def test_a_reader_that_ignores_deltas_gets_the_same_messages(
    tmp_path: Path, fake_model: FakeModelServer
) -> None:
    fake_model.script({"stage": "auto_reply", "content": ANSWER, "chunks": 10, "chunk_delay": 0.02})
    with running_server(tmp_path, fake_model.base_url) as server:
        messages, end, _ = server.run({"goal": "Capital of France?", "mode": "chat"})
    assert end["status"] == "completed"
    assert [m["meta"]["action_type"] for m in messages] == ["question", "auto_reply"]
    assert messages[1]["content"] == ANSWER


def test_deltas_reach_a_reader_on_another_process(
    tmp_path: Path, fake_model: FakeModelServer
) -> None:
    """PostgreSQL, two `planact serve`: the run executes on A, the reader follows it on B;
    the command's output reaches B while the command runs (LISTEN/NOTIFY)."""
    from tests.e2e.server import server_env
    from tests.pg import postgres_url, reset

    url = postgres_url()
    reset(url)
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Print")},
        {"stage": "thinking", "content": run(WAIT_FOR_GO) + finish("printed")},
    )
    env = server_env(tmp_path, fake_model.base_url, DATABASE_URL=url)
    a = Server(tmp_path, env).start()
    b = Server(tmp_path, env).start()
    try:
        with a.client() as ca:
            r = ca.post(
                "/api/agent/run",
                json={"goal": "print lines", "mode": "agent"},
                headers={"Accept": "application/json"},
            )
            assert r.status_code == 202
            cid, rid = r.json()["conversation_id"], r.json()["run_id"]
        live = ""
        final = None
        with b.client() as cb, cb.stream("GET", f"/api/agent/runs/{rid}/events") as resp:
            for ev in iter_events(resp.iter_lines()):
                if ev.event == "end":
                    assert ev.json["status"] == "completed"
                    break
                if ev.event == "delta" and ev.json.get("stream") == "stdout":
                    assert final is None
                    live += ev.json["text"]
                    go = workspace(tmp_path, cid) / "go"
                    if "first" in live and not go.exists():
                        go.write_text("")  # the command waits for it: B saw it live
                elif (
                    ev.event == "message"
                    and ev.json["meta"]["action_type"] == "terminal_run"
                    and ev.json["status"] != "running"
                ):
                    final = ev.json
        assert live == "first\nsecond\n"
        assert final is not None and final["status"] == "success"
    finally:
        b.stop()
        a.stop()


def test_summary_and_plan_prose_stream_under_their_messages_uuid(
    tmp_path: Path, fake_model: FakeModelServer
) -> None:
    summary = "Both steps are done: **a.txt** holds A and the listing shows it."
    fake_model.script(
        {
            "stage": "planning",
            "content": plan_reply("One", "Two", prose="Two steps, then a summary."),
            "chunks": 6,
        },
        {"stage": "thinking", "content": "Writing it now.\n" + run("echo A > a.txt") + finish("a")},
        {"stage": "thinking", "content": run("ls") + finish("listed")},
        {"stage": "summary", "content": summary, "chunks": 8},
    )
    with running_server(tmp_path, fake_model.base_url) as server:
        events, _ = read_all(
            server, "POST", "/api/agent/run", json={"goal": "two steps", "mode": "agent"}
        )
    messages = {e.json["uuid"]: e.json for e in events if e.event == "message"}
    by_uuid: dict[str, str] = {}
    for e in events:
        if e.event == "delta" and "stream" not in e.json:
            by_uuid[e.json["uuid"]] = by_uuid.get(e.json["uuid"], "") + e.json["text"]
    kinds = {
        messages[u]["meta"]["action_type"] + "/" + messages[u]["type"]: text
        for u, text in by_uuid.items()
    }
    assert kinds == {
        "auto_reply/": "Two steps, then a summary.\n",
        "thinking/narration": "Writing it now.\n",
        "finish_summery/": summary,
    }
    for uuid, text in by_uuid.items():
        assert text.strip() == messages[uuid]["content"]
