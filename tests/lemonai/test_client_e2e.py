"""LemonAI's client logic (tests/lemonai/client.py) against the real `planact serve`, real
litellm and the fake model over HTTP: what a LemonAI user sees for a two-task run, a
failed run, a stopped run, a chat goal, and each replayed."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.agent.scripts import finish, plan_reply, run, write
from tests.e2e.server import Server, running_server
from tests.fakellm import FakeModelServer
from tests.lemonai.client import Chat, StreamResult, consume, render, replay

pytestmark = pytest.mark.e2e

HELLO = 'print("héllo, wörld")\n'


class LemonUser:
    """The client's send flow: create the conversation, list, run, stream."""

    def __init__(self, server: Server) -> None:
        self.http = httpx.Client(
            base_url=f"{server.url}/lemonai", timeout=60, headers={"Authorization": "Bearer null"}
        )
        self.chat = Chat()

    def close(self) -> None:
        self.http.close()

    def get(self, path: str, **params: Any) -> Any:
        resp = self.http.get(path, params=params)
        assert resp.status_code == 200, resp.text
        body = resp.json()
        assert body["code"] == 0, body
        return body["data"]

    def post(self, path: str, body: dict[str, Any]) -> Any:
        resp = self.http.post(path, json=body)
        assert resp.status_code == 200, resp.text
        assert resp.json()["code"] == 0
        return resp.json()["data"]

    def send(
        self, question: str, mode: str = "task", on_token: Any = None
    ) -> tuple[str, StreamResult]:
        conv = self.post(
            "/api/conversation", {"content": question, "mode_type": mode, "agent_id": 1}
        )
        cid = conv["conversation_id"]
        self.chat.conversations = self.get("/api/conversation", mode_type="task", agent_id=1)
        self.chat.set_status(cid, "running")  # sendMessage marks it before streaming
        # ... but the list the client fetches when the route names the agent can land after
        # that (measured in the real client): its status must not say "done"
        self.chat.conversations = self.get("/api/conversation", mode_type="task", agent_id=1)
        self.chat.messages = []
        self.chat.init_message(question, self.chat.messages)
        body = {
            "question": question,
            "conversation_id": cid,
            "fileIds": [],
            "mode": mode,
            "model_id": 1,
        }
        with self.http.stream(
            "POST",
            "/api/agent/run",
            content=json.dumps(body),
            headers={"Content-Type": "application/json", "node-token": "", "Authorization": ""},
        ) as resp:
            assert resp.status_code == 200
            result = consume(self.chat, cid, resp.iter_lines(), on_token=on_token)
        return cid, result

    def replayed(self, cid: str) -> list[dict[str, Any]]:
        return render(replay(self.get("/api/message/list", conversation_id=cid)))


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, fake_model_server: FakeModelServer
) -> Iterator[Server]:
    # one server for the module: each test scripts the model anew (fake_model resets it)
    with running_server(tmp_path_factory.mktemp("lemon"), fake_model_server.base_url) as srv:
        yield srv


@pytest.fixture
def lemon(server: Server, fake_model: FakeModelServer) -> Iterator[LemonUser]:
    user = LemonUser(server)
    try:
        yield user
    finally:
        user.close()


def kinds(view: list[dict[str, Any]]) -> list[str]:
    return [v["kind"] for v in view]


def test_two_task_run_renders_like_a_native_run_and_replays_the_same(
    lemon: LemonUser, fake_model: FakeModelServer
) -> None:
    fake_model.script(
        {"stage": "route", "content": '{"task_type": "code", "needs_tools": true}'},
        {
            "stage": "planning",
            "content": plan_reply("Write hello.py", "Run it", prose="Two steps."),
        },
        {"stage": "thinking", "content": write("hello.py", HELLO) + finish("wrote it")},
        {"stage": "thinking", "content": run("python3 hello.py") + finish("ran it")},
        {"stage": "summary", "content": "Wrote and ran **hello.py**."},
    )
    cid, result = lemon.send("Write hello.py and run it")
    assert result.mode == "agent"
    view = render(lemon.chat.messages)
    assert kinds(view) == ["user", "auto_reply", "plan", "finish_summery"]
    assert view[0]["text"] == "Write hello.py and run it"
    assert view[1]["text"] == "Two steps."
    plan = view[2]
    assert plan["text"] == ""  # the client lists the tasks itself, once
    assert plan["tasks"] == [
        {
            "description": "Write hello.py",
            "shown": True,
            "tick": "success",
            "actions": [{"text": "Edit file hello.py", "status": "success"}],
        },
        {
            "description": "Run it",
            "shown": True,
            "tick": "success",
            "actions": [{"text": "Run command python3 hello.py", "status": "success"}],
        },
    ]
    assert view[3]["text"] == "Wrote and ran **hello.py**."
    assert view[3]["files"] == ["hello.py"]
    # the file chip opens through POST /api/file/read with the path as the client got it
    summary = lemon.chat.messages[-1]
    path = summary["meta"]["json"][0]["filepath"]
    assert path.startswith("/") and path.endswith(f"Conversation_{cid}/hello.py")
    got = lemon.http.post("/api/file/read", json={"path": path})
    assert got.status_code == 200 and got.content == HELLO.encode()
    # the terminal preview shows the command and its output
    action = lemon.chat.messages[2]["meta"]["json"][1]["actions"][0]
    assert action["content"][0] == "python3 hello.py"
    assert "héllo, wörld" in action["content"][1]
    # the sidebar says done; a replay renders the same page
    assert lemon.chat.status(cid) == "done"
    conv = lemon.get(f"/api/conversation/{cid}")
    assert conv["status"] == "done" and conv["update_at"]
    assert lemon.replayed(cid) == view


def test_failed_run_shows_the_failed_task_and_its_reason_without_crashing(
    lemon: LemonUser, fake_model: FakeModelServer
) -> None:
    fake_model.script(
        {"stage": "route", "content": '{"task_type": "code", "needs_tools": true}'},
        {"stage": "planning", "content": plan_reply("Do the thing")},
        *[{"stage": "thinking", "content": "I will not use any tool."} for _ in range(3)],
    )
    cid, result = lemon.send("Do the thing")
    assert result.mode == "agent"
    view = render(lemon.chat.messages)  # Planing.vue reads comments: no crash
    assert kinds(view) == ["user", "auto_reply", "plan", "error", "finish_summery"]
    task = view[2]["tasks"][0]
    assert task["tick"] == "failure"
    assert "no usable action" in task["alert"]
    assert lemon.replayed(cid) == view
    assert lemon.get(f"/api/conversation/{cid}")["status"] == "done"


def test_stopped_run_ends_with_the_stop_block_and_replays(
    lemon: LemonUser, fake_model: FakeModelServer
) -> None:
    fake_model.script(
        {"stage": "route", "content": '{"task_type": "code", "needs_tools": true}'},
        {"stage": "planning", "content": plan_reply("Wait for the model")},
        {"stage": "thinking", "content": finish("never"), "hold": "thinking"},
    )
    stopped: list[Any] = []

    def stop_when_the_task_runs(token: str) -> None:
        if token.startswith("{") and not stopped:
            msg = json.loads(token)
            if msg["meta"]["action_type"] == "task" and msg["status"] == "running":
                cid = msg["conversation_id"]
                stopped.append(lemon.post("/api/agent/stop", {"conversation_id": cid}))
                # the client drops the stream once stop answers: by then the run has ended
                stored = lemon.get("/api/message/list", conversation_id=cid)
                kinds = [m["meta"]["action_type"] for m in stored]
                assert kinds[-2:] == ["stop", "finish_summery"]

    cid, result = lemon.send("Wait", on_token=stop_when_the_task_runs)
    assert result.mode == "agent"
    assert stopped and stopped[0]["status"] == "stopped"
    view = render(lemon.chat.messages)
    assert kinds(view) == ["user", "auto_reply", "plan", "stop", "finish_summery"]
    task = view[2]["tasks"][0]
    assert task["tick"] == "failure" and task["alert"] == "The run was stopped."
    assert lemon.replayed(cid) == view
    assert lemon.get(f"/api/conversation/{cid}")["planact_status"] == "stopped"
    # nothing active: stopping again is a no-op
    assert lemon.post("/api/agent/stop", {"conversation_id": cid})["status"] == "done"


@pytest.mark.parametrize("mode", ["auto", "chat"])
def test_chat_goal_streams_chat_tokens_and_closes_the_bubble(
    lemon: LemonUser, fake_model: FakeModelServer, mode: str
) -> None:
    script = [{"stage": "auto_reply", "content": "Paris is the capital of France."}]
    if mode == "auto":
        script.insert(
            0, {"stage": "route", "content": '{"task_type": "chat", "needs_tools": false}'}
        )
    fake_model.script(*script)
    cid, result = lemon.send("Which city is the capital of France?", mode=mode)
    assert result.mode == "chat"
    assert result.tokens[-1].startswith("__lemon_out_end__")
    view = render(lemon.chat.messages)
    assert view == [
        {"kind": "user", "text": "Which city is the capital of France?"},
        {"kind": "chat", "text": "Paris is the capital of France.", "open": False},
    ]
    replayed = lemon.replayed(cid)
    assert kinds(replayed) == ["user", "chat"]  # no "Planning in progress" spinner
    assert replayed[1]["text"] == "Paris is the capital of France."


def test_twins_mode_runs_the_chat_answer_beside_the_agent(
    lemon: LemonUser, fake_model: FakeModelServer
) -> None:
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Write hello.py", prose="One step.")},
        {"stage": "thinking", "content": write("hello.py", HELLO) + finish("wrote it")},
        {"stage": "auto_reply", "content": "A hello.py prints a greeting."},
    )
    question = "Write hello.py"
    conv = lemon.post("/api/conversation", {"content": question, "mode_type": "twins"})
    cid = conv["conversation_id"]
    twin = lemon.post("/api/conversation/twins", {"conversation_id": cid})["conversation_id"]
    lemon.chat.conversations = lemon.get("/api/conversation")
    assert {cid, twin} <= {c["conversation_id"] for c in lemon.chat.conversations}
    lemon.chat.init_message(question, lemon.chat.messages)
    lemon.chat.init_message(question, lemon.chat.twins)
    results: dict[str, StreamResult] = {}

    def stream(target: str, mode: str, column: list[dict[str, Any]]) -> None:
        body = {"question": question, "conversation_id": target, "mode": mode}
        with lemon.http.stream("POST", "/api/agent/run", json=body) as resp:
            assert resp.status_code == 200
            results[mode] = consume(lemon.chat, target, resp.iter_lines(), column=column)

    threads = [
        threading.Thread(target=stream, args=(cid, "task", lemon.chat.messages)),
        threading.Thread(target=stream, args=(twin, "chat", lemon.chat.twins)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert results["task"].mode == "agent" and results["chat"].mode == "chat"
    assert render(lemon.chat.twins) == [
        {"kind": "user", "text": question},
        {"kind": "chat", "text": "A hello.py prints a greeting.", "open": False},
    ]
    agent = render(lemon.chat.messages)
    assert kinds(agent) == ["user", "auto_reply", "plan", "finish_summery"]
    assert agent[2]["tasks"][0]["tick"] == "success"
    tokens = lemon.get(f"/api/conversation/twins/tokens/{twin}")
    assert tokens["total"] == tokens["input_tokens"] + tokens["output_tokens"] > 0
