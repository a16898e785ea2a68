"""The LemonAI protocol under /lemonai, row by row of the differences measured against
LemonAI's own backend, through the ASGI app with a ScriptedLLM."""

from __future__ import annotations

import base64
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from backend.config import Settings
from backend.llm.testing import LLMError, ScriptedLLM
from tests.agent.scripts import finish, plan_reply, run, write
from tests.lemonai.client import render, replay, sse_data
from tests.support.lemonai import JSON, create, lemon_client, stream_run
from tests.support.settings import make_settings


def agent_messages(tokens: list[str]) -> list[dict[str, Any]]:
    return [json.loads(t) for t in tokens[1:]]


def two_task_llm() -> ScriptedLLM:
    return ScriptedLLM(
        [
            ("planning", plan_reply("Write hé.py", "Run it", prose="Deux étapes.")),
            ("thinking", write("hé.py", 'print("ü")\n') + finish("wrote")),
            ("thinking", run("python3 hé.py") + finish("ran")),
            ("summary", "Done: **hé.py**."),
        ]
    )


# rows 1-4, 11, 12: transport, mode marker, no end event, create-then-run, plan, actions
def test_agent_run_stream_is_base64_mode_first_no_end_and_translated(settings: Settings) -> None:
    llm = two_task_llm()
    with lemon_client(settings, llm) as client:
        cid = create(client, "Write hé.py and run it")
        raw, tokens, headers = stream_run(
            client, {"question": "Write hé.py and run it", "conversation_id": cid, "mode": "task"}
        )
        assert llm.errors == []
        assert headers["x-conversation-id"] == cid
        # 1: every data line is base64 of UTF-8 (never JSON on the wire)
        assert all(not r.startswith("{") for r in raw)
        assert any("é" in t for t in tokens)
        # 2: the mode marker comes first
        assert tokens[0] == '__lemon_mode__{"mode": "agent"}'
        msgs = agent_messages(tokens)
        kinds = [m["meta"]["action_type"] for m in msgs]
        # 3: no end event: the last chunk is the summary, then the stream closes
        assert kinds[-1] == "finish_summery"
        assert "thinking" not in kinds
        # 11: plan content '' and the tasks by title
        plan = msgs[kinds.index("plan")]
        assert plan["content"] == ""
        assert [t["description"] for t in plan["meta"]["json"]] == ["Write hé.py", "Run it"]
        # 10 (success side): task meta.json is one object with comments
        tasks = [m for m in msgs if m["meta"]["action_type"] == "task"]
        assert all(isinstance(t["meta"]["json"], dict) for t in tasks)
        assert [t["meta"]["json"]["status"] for t in tasks] == [
            "running",
            "success",
            "running",
            "success",
        ]
        assert all(t["meta"]["json"]["comments"] == "" for t in tasks)
        # 12: a running action's content is its path; the terminal's is the command
        write_running = next(m for m in msgs if m["meta"]["action_type"] == "write_code")
        assert write_running["status"] == "running" and write_running["content"] == "hé.py"
        workspace = Path(settings.workspace_dir).resolve() / "user_1" / f"Conversation_{cid}"
        assert write_running["meta"]["filepath"] == str(workspace / "hé.py")
        term = next(m for m in msgs if m["meta"]["action_type"] == "terminal_run")
        assert term["content"] == "python3 hé.py"
        files = msgs[-1]["meta"]["json"]
        assert [f["filepath"] for f in files] == [str(workspace / "hé.py")]
        assert files[0]["filename"] == "hé.py"
        # 5: the replayed list is the same translation, in the envelope
        listed = client.get(f"/lemonai/api/message/list?conversation_id={cid}").json()
        assert listed["code"] == 0
        assert [m["uuid"] for m in listed["data"]] == [m["uuid"] for m in msgs]
        assert listed["data"][1:] == msgs[1:]


def test_a_run_without_a_created_conversation_is_404_in_the_client_encoding(
    settings: Settings,
) -> None:
    with lemon_client(settings, ScriptedLLM([])) as client:
        resp = client.post(
            "/lemonai/api/agent/run",
            json={"question": "x", "conversation_id": "nope", "mode": "task"},
            headers={"Accept": "text/event-stream"},
        )
        assert resp.status_code == 404
        tokens = [base64.b64decode(d).decode() for d in sse_data(resp.text.splitlines())]
        assert tokens[0] == '__lemon_mode__{"mode": "agent"}'
        error = json.loads(tokens[1])
        assert error["meta"]["action_type"] == "error" and "nope" in error["content"]
        # without an event-stream Accept it is the JSON envelope
        plain = client.post(
            "/lemonai/api/agent/run", json={"question": "x", "conversation_id": "nope"}
        )
        assert plain.status_code == 404
        assert plain.json() == {"code": 404, "data": None, "msg": "No conversation 'nope'."}


# 5: routes and envelope, errors included
def test_conversation_routes_answer_in_the_envelope(settings: Settings) -> None:
    llm = ScriptedLLM([("auto_reply", "Bonjour.")])
    with lemon_client(settings, llm) as client:
        cid = create(client, "  Say   hello  ")
        one = client.get(f"/lemonai/api/conversation/{cid}").json()
        assert one["code"] == 0 and one["msg"]
        conv = one["data"]
        assert conv["title"] == "Say hello"
        assert conv["status"] == "running"  # 6: made to run: the client drops a "done" one
        assert conv["update_at"] and conv["create_at"]  # 6: update_at, not updated_at
        assert conv["twins_id"] is None
        listed = client.get("/lemonai/api/conversation?mode_type=task&agent_id=1").json()
        assert [c["conversation_id"] for c in listed["data"]] == [cid]
        stream_run(client, {"question": "Say hello", "conversation_id": cid, "mode": "chat"})
        after = client.get(f"/lemonai/api/conversation/{cid}").json()["data"]
        assert after["status"] == "done" and after["planact_status"] == "completed"
        assert after["update_at"] >= conv["update_at"]
        assert after["input_tokens"] == 10 and after["output_tokens"] == 5
        # PUT with an empty title (the client's auto-title) keeps the title
        put = client.put(f"/lemonai/api/conversation/{cid}", json={"title": ""})
        assert put.json()["data"]["title"] == "Say hello"
        renamed = client.put(f"/lemonai/api/conversation/{cid}", json={"title": " Greeting "})
        assert renamed.json()["data"]["title"] == "Greeting"
        assert client.get(f"/api/conversations/{cid}").json()["title"] == "Greeting"
        gone = client.delete(f"/lemonai/api/conversation/{cid}", headers=JSON)
        assert gone.json()["data"] == {"conversation_id": cid, "deleted": True}
        missing = client.get(f"/lemonai/api/conversation/{cid}")
        assert missing.status_code == 404
        assert missing.json() == {"code": 404, "data": None, "msg": f"No conversation {cid!r}."}
        assert client.get("/lemonai/api/message/list").status_code == 400
        bad = client.post("/lemonai/api/conversation", content=b"{", headers=JSON)
        assert bad.status_code == 400 and bad.json()["code"] == 400
        form = client.post("/lemonai/api/conversation", data={"content": "x"})
        assert form.status_code == 415 and form.json()["code"] == 415
        unknown = client.get("/lemonai/api/no/such/route")
        assert unknown.status_code == 404 and unknown.json()["code"] == 404
        # planact's own API is unchanged beside it
        assert client.get("/api/conversations").status_code == 200


# 7: modes
@pytest.mark.parametrize(
    ("lemon_mode", "planact_mode"),
    [("twins", "auto"), ("task", "agent"), ("auto", "auto"), ("chat", "chat"), (None, "auto")],
)
def test_client_modes_map_to_planact_modes(
    settings: Settings, lemon_mode: str | None, planact_mode: str
) -> None:
    script: list[tuple[str, Any]] = [("auto_reply", "Hi.")]
    if planact_mode == "auto":
        script.insert(0, ("route", '{"task_type": "chat", "needs_tools": false}'))
    if planact_mode == "agent":
        script = [("planning", plan_reply("One")), ("thinking", finish("done"))]
    llm = ScriptedLLM(script)
    with lemon_client(settings, llm) as client:
        cid = create(client)
        body: dict[str, Any] = {"question": "zzz qqq", "conversation_id": cid}
        if lemon_mode is not None:
            body["mode"] = lemon_mode
        stream_run(client, body)
        runs = client.get(f"/api/conversations/{cid}").json()["runs"]
        assert [r["mode"] for r in runs] == [planact_mode]
        assert llm.errors == []


def test_unknown_mode_and_bad_fields_are_400(settings: Settings) -> None:
    with lemon_client(settings, ScriptedLLM([])) as client:
        cid = create(client)
        for body in (
            {"question": "x", "conversation_id": cid, "mode": "turbo"},
            {"question": "", "conversation_id": cid},
            {"question": "x", "conversation_id": 5},
            {"question": "x", "conversation_id": cid, "fileIds": "a"},
        ):
            resp = client.post("/lemonai/api/agent/run", json=body)
            assert resp.status_code == 400, body
            assert resp.json()["code"] == 400 and resp.json()["data"] is None
        long = client.post(
            "/lemonai/api/agent/run", json={"question": "x" * 100_001, "conversation_id": cid}
        )
        assert long.status_code == 413


# 13: a goal that needs no tools
def test_chat_goal_in_auto_mode_is_chat_tokens_and_out_end(settings: Settings) -> None:
    llm = ScriptedLLM(
        [("route", '{"task_type": "chat", "needs_tools": false}'), ("auto_reply", "Paris.")]
    )
    with lemon_client(settings, llm) as client:
        cid = create(client)
        _raw, tokens, _ = stream_run(
            # a model id the client cached from another server: the default model answers
            client,
            {"question": "zzz capital?", "conversation_id": cid, "mode": "auto", "model_id": 17},
        )
        assert tokens[0] == '__lemon_mode__{"mode": "chat"}'
        assert tokens[1] == "Paris."
        end = tokens[2]
        assert end.startswith("__lemon_out_end__")
        ids = json.loads(end[len("__lemon_out_end__") :])
        assert ids == {"message_id": "2", "pid": "1"}
        assert len(tokens) == 3
        listed = client.get(f"/lemonai/api/message/list?conversation_id={cid}").json()["data"]
        assert [m["meta"]["action_type"] for m in listed] == ["question", "chat"]


def test_chat_mode_model_error_reaches_the_bubble(settings: Settings) -> None:
    llm = ScriptedLLM([("auto_reply", LLMError("The provider said no (401)."))])
    with lemon_client(settings, llm) as client:
        cid = create(client)
        _raw, tokens, _ = stream_run(
            client, {"question": "hi", "conversation_id": cid, "mode": "chat"}
        )
        assert tokens[0] == '__lemon_mode__{"mode": "chat"}'
        assert "The provider said no (401)." in "".join(tokens[1:-1])
        assert tokens[-1].startswith("__lemon_out_end__")


# 10: failed task
def test_failed_task_carries_its_reason_in_comments(settings: Settings) -> None:
    llm = ScriptedLLM(
        [("planning", plan_reply("Break"))] + [("thinking", "no action")] * 3,
    )
    with lemon_client(settings, llm) as client:
        cid = create(client)
        _raw, tokens, _ = stream_run(
            client, {"question": "break it", "conversation_id": cid, "mode": "task"}
        )
        msgs = agent_messages(tokens)
        kinds = [m["meta"]["action_type"] for m in msgs]
        assert kinds[-3:] == ["task", "error", "finish_summery"]
        failed = msgs[-3]
        assert failed["status"] == "failure"
        assert failed["meta"]["json"]["status"] == "failure"
        assert failed["meta"]["json"]["comments"] == msgs[-2]["content"]
        assert "no usable action" in failed["meta"]["json"]["comments"]
        view = render(replay(msgs))
        assert view[2]["tasks"][0]["tick"] == "failure"
        assert view[2]["tasks"][0]["alert"] == failed["meta"]["json"]["comments"]


# 8: stop by conversation id, and 409 while a run is active
def test_stop_by_conversation_id_and_conflict_while_running(settings: Settings) -> None:
    llm = ScriptedLLM([("planning", plan_reply("Sleep")), ("thinking", run("sleep 30"))])
    with lemon_client(settings, llm) as client:
        cid = create(client)
        seen: list[str] = []
        with client.stream(
            "POST",
            "/lemonai/api/agent/run",
            json={"question": "sleep", "conversation_id": cid, "mode": "task"},
        ) as resp:
            for data in sse_data(resp.iter_lines()):
                token = base64.b64decode(data).decode()
                seen.append(token)
                if '"action_type":"terminal_run"' in token and '"status":"running"' in token:
                    listed = client.get("/lemonai/api/conversation").json()["data"]
                    assert listed[0]["status"] == "running"  # 6
                    again = client.post(
                        "/lemonai/api/agent/run",
                        json={"question": "again", "conversation_id": cid},
                        headers={"Accept": "text/event-stream"},
                    )
                    assert again.status_code == 409
                    stop = client.post("/lemonai/api/agent/stop", json={"conversation_id": cid})
                    assert stop.json()["data"]["status"] == "stopped"
        kinds = [json.loads(t)["meta"]["action_type"] for t in seen[1:]]
        assert kinds[-2:] == ["stop", "finish_summery"]
        assert client.get(f"/api/conversations/{cid}").json()["status"] == "stopped"
        idle = client.post("/lemonai/api/agent/stop", json={"conversation_id": cid})
        assert idle.json()["data"]["status"] == "done"
        unknown = client.post("/lemonai/api/agent/stop", json={"conversation_id": "nope"})
        assert unknown.status_code == 404


# 9: files by the path the client got, confined
def test_file_read_maps_absolute_paths_back_and_refuses_the_rest(
    settings: Settings, tmp_path: Path
) -> None:
    llm = ScriptedLLM(
        [("planning", plan_reply("Write")), ("thinking", write("a/b.txt", "bee\n") + finish("ok"))]
    )
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-CONTENT")
    with lemon_client(settings, llm) as client:
        cid = create(client)
        _raw, tokens, _ = stream_run(
            client, {"question": "w", "conversation_id": cid, "mode": "task"}
        )
        path = agent_messages(tokens)[-1]["meta"]["json"][0]["filepath"]
        got = client.post("/lemonai/api/file/read", json={"path": path})
        assert got.status_code == 200 and got.content == b"bee\n"
        assert got.headers["x-content-type-options"] == "nosniff"
        rel = client.post(
            "/lemonai/api/file/read", json={"path": "a/b.txt", "conversation_id": cid}
        )
        assert rel.content == b"bee\n"
        workspace = Path(path).parent.parent
        os.symlink(secret, workspace / "link.txt")
        other = create(client)
        for bad in (
            str(secret),
            "/etc/passwd",
            f"{workspace}/../../../secret.txt",
            f"{workspace}/link.txt",
            f"{workspace}/a/../../Conversation_{cid}/../../secret.txt",
            str(workspace.parent / f"Conversation_{other}" / "a" / "b.txt"),
            str(workspace.parent / "Conversation_nope" / "x"),
            str(workspace.parent.parent / "user_2" / f"Conversation_{cid}" / "a" / "b.txt"),
            f"{workspace}/a",
        ):
            resp = client.post("/lemonai/api/file/read", json={"path": bad})
            assert resp.status_code == 404, bad
            assert resp.json()["code"] == 404
            assert b"TOP-SECRET-CONTENT" not in resp.content
        # a NUL is refused by the strict JSON reader before any path is looked at
        nul = client.post("/lemonai/api/file/read", json={"path": f"{workspace}\x00/a/b.txt"})
        assert nul.status_code == 400 and nul.json()["code"] == 400
        no_cid = client.post("/lemonai/api/file/read", json={"path": "a/b.txt"})
        assert no_cid.status_code == 400


# 14: auth
def test_without_auth_token_any_bearer_is_the_local_user(settings: Settings) -> None:
    with lemon_client(settings, ScriptedLLM([])) as client:
        assert create(client, Authorization="Bearer null")
        info = client.get("/lemonai/api/users/userinfo", headers={"Authorization": "Bearer null"})
        assert info.json()["data"]["id"] == "1"


def test_with_auth_token_either_header_must_carry_it(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, auth_token="s3cret")
    llm = ScriptedLLM([("auto_reply", "ok")])
    with lemon_client(settings, llm) as client:
        for headers in ({}, {"Authorization": "Bearer null"}, {"node-token": "wrong"}):
            resp = client.get("/lemonai/api/conversation", headers=headers)
            assert resp.status_code == 401
            assert resp.json()["code"] == 401 and "AUTH_TOKEN" in resp.json()["msg"]
        cid = create(client, Authorization="Bearer s3cret")
        # the client's stream sends only node-token
        _raw, tokens, _ = stream_run(
            client,
            {"question": "hi", "conversation_id": cid, "mode": "chat"},
            headers={"node-token": "s3cret"},
        )
        assert "".join(tokens[1:-1]) == "ok"  # the answer, streamed live in pieces
        refused = client.post(
            "/lemonai/api/agent/run",
            json={"question": "hi", "conversation_id": cid},
            headers={"node-token": ""},
        )
        assert refused.status_code == 401


# 15: the calls the client makes at load time and around a run
def test_load_time_calls_answer_empty_states_and_real_models(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, llm_model="openai/gpt-4o-mini")
    with lemon_client(settings, ScriptedLLM([])) as client:

        def data(method: str, path: str, body: Any = None) -> Any:
            resp = client.request(method, f"/lemonai{path}", json=body)
            assert resp.status_code == 200, (path, resp.text)
            assert resp.json()["code"] == 0
            return resp.json()["data"]

        agents = data("GET", "/api/agent")
        assert [a["id"] for a in agents] == [1]
        assert data("POST", "/api/agent/generate", {"question": "q"})["id"] == 1
        assert data("GET", "/api/agent/1")["name"] == "planact"
        models = data("GET", "/api/model/enabled")
        assert [(m["id"], m["model_name"]) for m in models] == [(1, "openai/gpt-4o-mini")]
        assert models[0]["is_subscribe"] is False
        for path in (
            "/api/mcp_server/active",
            "/api/mcp_server",
            "/api/knowledge/categories",
            "/api/recharge_product/list",
        ):
            assert data("GET", path) == []
        info = data("GET", "/api/users/userinfo")
        assert info["points"] == {} and info["membership"] == {}
        assert data("GET", "/api/runtime/vscode-url?conversation_id=x") == {
            "url": "",
            "vscode_url": "",
        }
        cid = create(client)
        assert data("PUT", f"/api/conversation/{cid}", {"title": ""})["conversation_id"] == cid
        twin = data("POST", "/api/conversation/twins", {"conversation_id": cid})
        assert twin["conversation_id"] != cid and twin["title"] == "Chat: a goal"
        tokens = data("GET", f"/api/conversation/twins/tokens/{twin['conversation_id']}")
        assert tokens == {"input_tokens": 0, "output_tokens": 0, "total": 0}


def test_upload_then_file_ids_put_files_in_the_workspace(settings: Settings) -> None:
    llm = ScriptedLLM(
        [("planning", plan_reply("Read")), ("thinking", finish("read the csv"))],
    )
    with lemon_client(settings, llm) as client:
        up = client.post(
            "/lemonai/api/file/upload",
            data={"conversation_id": ""},
            files={"files": ("../../da ta.csv", b"a,b\n1,2\n", "text/csv")},
        )
        assert up.status_code == 200, up.text
        staged = up.json()["data"][0]
        assert staged["name"] == "da ta.csv" and staged["filesize"] == 8 and staged["id"]
        cid = create(client)
        bad = client.post(
            "/lemonai/api/agent/run",
            json={"question": "q", "conversation_id": cid, "fileIds": [staged["id"], "0" * 32]},
        )
        assert bad.status_code == 404  # nothing moved on a bad id
        _raw, tokens, _ = stream_run(
            client,
            {
                "question": "Summarise it",
                "conversation_id": cid,
                "fileIds": [staged["id"]],
                "mode": "task",
            },
        )
        workspace = Path(settings.workspace_dir).resolve() / "user_1" / f"Conversation_{cid}"
        assert (workspace / "upload" / "da ta.csv").read_bytes() == b"a,b\n1,2\n"
        question = agent_messages(tokens)[0]
        assert question["content"] == "Summarise it"
        # the planner is told which files the person gave, like planact's own uploads
        planning = next(c for c in llm.calls if c.stage == "planning")
        assert "upload/da ta.csv" in planning.messages[0]["content"]
        again = client.post(
            "/lemonai/api/agent/run",
            json={"question": "q", "conversation_id": cid, "fileIds": [staged["id"]]},
        )
        assert again.status_code == 404  # an upload is attached once
        for body, status in (
            ({"files": {"other": ("a.txt", b"x")}}, 400),
            ({"data": {"x": "1"}}, 415),
            ({"content": b"x", "headers": {"Content-Type": "text/plain"}}, 415),
        ):
            resp = client.post("/lemonai/api/file/upload", **body)
            assert resp.status_code == status and resp.json()["code"] == status


def test_unsent_uploads_are_held_to_one_workspace_and_dropped_after_a_day(
    tmp_path: Path,
) -> None:
    """LemonAI uploads before it sends: what is never sent must not fill the disk."""
    settings = make_settings(tmp_path, upload_max_mb=1, workspace_max_mb=1)
    staging = Path(settings.workspace_dir) / "user_1" / ".lemonai-uploads"
    part = b"x" * (400 * 1024)

    def upload(*names: str) -> Any:
        files = [("files", (n, part, "x/y")) for n in names]
        return client.post("/lemonai/api/file/upload", files=files)

    llm = ScriptedLLM([("planning", plan_reply("Read")), ("thinking", finish("read"))])
    with lemon_client(settings, llm) as client:
        first = upload("a.bin", "b.bin")
        assert first.status_code == 200, first.text
        ids = [f["id"] for f in first.json()["data"]]
        over = upload("c.bin")  # 1.2 MB unsent: over WORKSPACE_MAX_MB, refused whole
        assert over.status_code == 413 and over.json()["code"] == 413
        assert "not yet sent" in over.json()["msg"]
        assert sorted(p.name for p in staging.iterdir()) == sorted(ids)  # nothing lost
        two = upload("c.bin", "d.bin")  # several files: the request is refused whole
        assert two.status_code == 413
        assert len(list(staging.iterdir())) == 2
        # sending them with a message moves them out of the staging area: room again
        cid = create(client)
        stream_run(client, {"question": "q", "conversation_id": cid, "fileIds": ids[:1]})
        assert upload("c.bin").status_code == 200
        # an upload left unsent for more than a day is dropped at the next upload
        stale = staging / ids[1]
        old = time.time() - 2 * 24 * 3600
        os.utime(stale, (old, old))
        assert upload("d.bin").status_code == 200
        assert not stale.exists()
        assert len(list(staging.iterdir())) == 2  # c.bin and d.bin
        late = client.post(
            "/lemonai/api/agent/run",
            json={"question": "q", "conversation_id": cid, "fileIds": [ids[1]]},
        )
        assert late.status_code == 404  # a dropped upload is an unknown id


def test_upload_over_the_limit_is_413_and_keeps_nothing(settings: Settings) -> None:
    with lemon_client(settings, ScriptedLLM([])) as client:
        big = b"x" * (50 * 1024 * 1024 + 1)
        resp = client.post("/lemonai/api/file/upload", files={"files": ("big.bin", big, "x/y")})
        assert resp.status_code == 413 and resp.json()["code"] == 413
        staging = Path(settings.workspace_dir) / "user_1" / ".lemonai-uploads"
        assert not staging.exists() or not any(staging.iterdir())


def test_runs_from_the_lemonai_client_never_wait_for_a_person(tmp_path: Path) -> None:
    """Its client has no approve button and no answer box: with APPROVAL_MODE=always the
    command still runs without asking, and the model is not offered ask_user."""
    settings = make_settings(tmp_path, approval_mode="always")
    llm = ScriptedLLM(
        [
            ("planning", plan_reply("Run it")),
            ("thinking", run("echo ran > out.txt") + finish("ran")),
        ]
    )
    with lemon_client(settings, llm) as client:
        cid = create(client, "Run it")
        _raw, tokens, _headers = stream_run(
            client, {"question": "Run it", "conversation_id": cid, "mode": "task"}
        )
        assert llm.errors == []
        kinds = [m["meta"]["action_type"] for m in agent_messages(tokens)]
        assert "approval" not in kinds and kinds[-1] == "finish_summery"
        workspace = Path(settings.workspace_dir).resolve() / "user_1" / f"Conversation_{cid}"
        assert (workspace / "out.txt").read_text() == "ran\n"
        thinking = next(c for c in llm.calls if c.stage == "thinking")
        assert "<ask_user>" not in thinking.messages[0]["content"]
        (row,) = client.get(f"/api/conversations/{cid}").json()["runs"]
        assert row["approval"] == "never" and row["can_ask"] is False


def test_ask_user_where_nobody_can_answer_fails_at_once_and_the_model_reads_why(
    tmp_path: Path,
) -> None:
    """Not offered, written anyway (docs/api.md "Runs that wait for a person"): the run does
    not wait; the question's partner is a failure the model reads, and the run goes on."""
    settings = make_settings(tmp_path)
    llm = ScriptedLLM(
        [
            ("planning", plan_reply("Ask")),
            ("thinking", "<ask_user><question>Which database?</question></ask_user>"),
            ("thinking", finish("assumed SQLite")),
        ]
    )
    with lemon_client(settings, llm) as client:
        cid = create(client, "Ask")
        stream_run(client, {"question": "Ask", "conversation_id": cid, "mode": "task"})
        assert llm.errors == []
        stored = client.get(f"/api/conversations/{cid}/messages").json()
        asked = [m for m in stored if m["meta"]["action_type"] == "ask_user"]
        assert [(m["status"], m["content"][:25]) for m in asked] == [
            ("running", "Which database?"),
            ("failure", "There is no person to ask"),
        ]
        (row,) = client.get(f"/api/conversations/{cid}").json()["runs"]
        assert row["status"] == "completed" and row["can_ask"] is False
        second = [c for c in llm.calls if c.stage == "thinking"][1]
        assert "There is no person to ask in this run" in str(second.messages)
