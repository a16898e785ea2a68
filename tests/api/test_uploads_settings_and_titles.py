"""Routes through the ASGI app: uploads, settings, model check, rename, search,
retry, zip names, titles, workspace paths in results, run log lines."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from backend.app import create_app
from backend.config import Settings
from backend.llm.base import LLMConfigError
from backend.llm.testing import ScriptedLLM
from tests.agent.scripts import finish, plan_reply, run, write
from tests.sse_client import collect
from tests.support.settings import make_settings


@contextmanager
def client_for(settings: Settings, llm: ScriptedLLM | None = None) -> Iterator[TestClient]:
    app = create_app(settings, llm=llm or ScriptedLLM([]))
    with TestClient(app) as client:
        yield client


def post_run(client: TestClient, body: dict[str, Any], path: str = "/api/agent/run") -> Any:
    with client.stream("POST", path, json=body) as resp:
        assert resp.status_code == 200, resp.read()
        messages, end = collect(resp.iter_lines())
        return messages, end, resp.headers


def new_conversation(client: TestClient, **body: Any) -> str:
    resp = client.post("/api/conversations", json=body)
    assert resp.status_code == 201, resp.text
    return str(resp.json()["conversation_id"])


def upload(client: TestClient, cid: str, files: list[tuple[str, bytes]], **data: str) -> Any:
    return client.post(
        f"/api/conversations/{cid}/files",
        files=[("file", (name, content, "application/octet-stream")) for name, content in files],
        data=data,
    )


def raw_upload(client: TestClient, cid: str, filename: str, directory: str) -> Any:
    """A multipart body written by hand: names reach the server byte for byte (httpx would
    percent-encode control characters)."""
    b = "XyZzY"
    body = (
        f'--{b}\r\nContent-Disposition: form-data; name="dir"\r\n\r\n{directory}\r\n'
        f'--{b}\r\nContent-Disposition: form-data; name="file"; filename="{filename}"\r\n'
        f"Content-Type: text/plain\r\n\r\nx\r\n--{b}--\r\n"
    ).encode()
    return client.post(
        f"/api/conversations/{cid}/files",
        content=body,
        headers={"content-type": f"multipart/form-data; boundary={b}"},
    )


def workspace_of(settings: Settings, cid: str, user: str = "1") -> Path:
    return Path(settings.workspace_dir).resolve() / f"user_{user}" / f"Conversation_{cid}"


def error_of(resp: Any) -> str:
    body = resp.json()
    assert set(body) == {"error"}, body
    return str(body["error"]["message"])


# -- conversations: create, rename, search ----------------------------------------------


def test_create_empty_conversation_then_rename_and_search(settings: Settings) -> None:
    with client_for(settings) as client:
        cid = new_conversation(client, title="Sales  figures\n2026")
        other = new_conversation(client)
        listed = {c["conversation_id"]: c for c in client.get("/api/conversations").json()}
        assert listed[cid]["title"] == "Sales figures 2026"
        assert listed[cid]["status"] == "idle"
        assert listed[other]["title"] == ""

        resp = client.patch(f"/api/conversations/{other}", json={"title": "Weather 50% chart"})
        assert resp.status_code == 200, resp.text
        assert resp.json()["title"] == "Weather 50% chart"

        def search(q: str) -> list[str]:
            resp = client.get("/api/conversations", params={"q": q})
            assert resp.status_code == 200
            return [c["conversation_id"] for c in resp.json()]

        assert search("SALES") == [cid]
        assert search("50%") == [other]
        assert search("%") == [other]  # taken literally, not as a wildcard
        assert search("_") == []
        assert sorted(search("")) == sorted([cid, other])
        assert search("nothing like it") == []


def test_search_finds_a_conversation_by_the_text_of_a_later_goal(settings: Settings) -> None:
    llm = ScriptedLLM([("auto_reply", "Paris."), ("auto_reply", "Berlin.")])
    with client_for(settings, llm) as client:
        _, end, _ = post_run(client, {"goal": "capital of France?", "mode": "chat"})
        cid = end["conversation_id"]
        post_run(client, {"goal": "and of Germany?", "mode": "chat", "conversation_id": cid})
        found = client.get("/api/conversations", params={"q": "germany"}).json()
        assert [c["conversation_id"] for c in found] == [cid]
        assert found[0]["title"] == "capital of France?"


def test_bad_titles_and_queries_are_400(settings: Settings) -> None:
    with client_for(settings) as client:
        cid = new_conversation(client)
        for body in ({"title": 5}, {"title": ""}, {"title": "  "}, {}, {"title": "a\x00b"}):
            resp = client.patch(f"/api/conversations/{cid}", json=body)
            assert resp.status_code == 400, (body, resp.text)
        resp = client.patch(f"/api/conversations/{cid}", json={"title": "x" * 201})
        assert resp.status_code == 400
        assert client.post("/api/conversations", json={"title": ["x"]}).status_code == 400
        assert (
            client.post(
                "/api/conversations", content=b"{nope", headers={"Content-Type": "application/json"}
            ).status_code
            == 400
        )
        assert client.get("/api/conversations", params={"q": "a\x00"}).status_code == 400
        assert client.get("/api/conversations", params={"q": "x" * 501}).status_code == 400
        resp = client.patch("/api/conversations/nope", json={"title": "T"})
        assert resp.status_code == 404
        assert client.get(f"/api/conversations/{cid}").json()["title"] == ""


# -- uploads -----------------------------------------------------------------------------


def test_upload_several_files_into_a_folder(settings: Settings) -> None:
    csv = b"city,temp\nOslo,3\nRome,18\n"
    blob = bytes(range(256)) * 40
    with client_for(settings) as client:
        cid = new_conversation(client)
        resp = upload(client, cid, [("data.csv", csv), ("raw.bin", blob)], dir="inputs/2026")
        assert resp.status_code == 201, resp.text
        assert resp.json() == [
            {
                "filepath": "inputs/2026/data.csv",
                "filename": "data.csv",
                "url": f"/api/files/{cid}/inputs/2026/data.csv",
                "filesize": len(csv),
            },
            {
                "filepath": "inputs/2026/raw.bin",
                "filename": "raw.bin",
                "url": f"/api/files/{cid}/inputs/2026/raw.bin",
                "filesize": len(blob),
            },
        ]
        ws = workspace_of(settings, cid)
        assert (ws / "inputs/2026/data.csv").read_bytes() == csv
        assert (ws / "inputs/2026/raw.bin").read_bytes() == blob
        assert not list(ws.rglob(".upload-*"))  # no temporary file left behind
        assert client.get(f"/api/files/{cid}/inputs/2026/raw.bin").content == blob
        listed = [f["filepath"] for f in client.get(f"/api/conversations/{cid}/files").json()]
        assert listed == ["inputs/2026/data.csv", "inputs/2026/raw.bin"]
        # the same name again replaces the file
        resp = upload(client, cid, [("data.csv", b"new\n")], dir="inputs/2026")
        assert resp.status_code == 201
        assert (ws / "inputs/2026/data.csv").read_bytes() == b"new\n"


@pytest.mark.parametrize(
    ("filename", "directory"),
    [
        ("../escape.txt", ""),
        ("..", ""),
        ("a/b.txt", ""),
        ("ok.txt", "../.."),
        ("ok.txt", "sub/../../x"),
        ("ok.txt", "/etc"),
        ("/etc/passwd", ""),
        ("bad\x01name.txt", ""),
        ("ok.txt", "dir\x1bx"),
        ("bad\u202ename.txt", ""),
        ("ok.txt", "a\\b"),
        ("", ""),
    ],
)
def test_upload_names_that_could_leave_the_workspace_are_400(
    settings: Settings, filename: str, directory: str
) -> None:
    with client_for(settings) as client:
        cid = new_conversation(client)
        resp = raw_upload(client, cid, filename, directory)
        assert resp.status_code == 400, resp.text
        assert error_of(resp)
    root = Path(settings.workspace_dir)
    assert not root.exists() or not [p for p in root.rglob("*") if p.is_file()]
    assert not (Path(settings.workspace_dir).parent / "escape.txt").exists()


def test_upload_through_a_symlinked_folder_out_of_the_workspace_is_refused(
    settings: Settings, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    with client_for(settings) as client:
        cid = new_conversation(client)
        ws = workspace_of(settings, cid)
        ws.mkdir(parents=True)
        (ws / "link").symlink_to(outside)
        resp = upload(client, cid, [("x.txt", b"x")], dir="link")
        assert resp.status_code == 400
    assert list(outside.iterdir()) == []


def test_upload_over_upload_max_mb_is_413_and_writes_nothing(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, upload_max_mb=0.01)  # 10,485 bytes
    with client_for(settings) as client:
        cid = new_conversation(client)
        resp = upload(client, cid, [("big.bin", b"x" * 20_000)])
        assert resp.status_code == 413
        assert "UPLOAD_MAX_MB" in error_of(resp)
        # two files that fit alone but not together in one upload
        resp = upload(client, cid, [("a.bin", b"a" * 6000), ("b.bin", b"b" * 6000)])
        assert resp.status_code == 413
        assert not workspace_of(settings, cid).exists()
        assert upload(client, cid, [("small.bin", b"s" * 5000)]).status_code == 201


def test_upload_over_workspace_max_mb_is_413_and_writes_nothing(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, workspace_max_mb=0.01)
    with client_for(settings) as client:
        cid = new_conversation(client)
        assert upload(client, cid, [("one.bin", b"1" * 6000)]).status_code == 201
        resp = upload(client, cid, [("two.bin", b"2" * 3000), ("three.bin", b"3" * 3000)])
        assert resp.status_code == 413
        assert "WORKSPACE_MAX_MB" in error_of(resp)
        assert sorted(p.name for p in workspace_of(settings, cid).iterdir()) == ["one.bin"]
        # replacing a file counts only the difference
        assert upload(client, cid, [("one.bin", b"1" * 9000)]).status_code == 201


def test_upload_room_counts_every_file_as_the_runtime_does(tmp_path: Path) -> None:
    """Folders the file list skips (node_modules, .venv …) still fill the workspace: the
    upload limit measures what the runtime's WORKSPACE_MAX_MB measures."""
    settings = make_settings(tmp_path, workspace_max_mb=0.01)  # 10,485 bytes
    with client_for(settings) as client:
        cid = new_conversation(client)
        modules = workspace_of(settings, cid) / "node_modules"
        modules.mkdir(parents=True)
        (modules / "dep.js").write_bytes(b"d" * 8000)
        resp = upload(client, cid, [("data.csv", b"c" * 4000)])
        assert resp.status_code == 413, resp.text
        assert "WORKSPACE_MAX_MB" in error_of(resp)
        assert not (workspace_of(settings, cid) / "data.csv").exists()
        assert upload(client, cid, [("data.csv", b"c" * 2000)]).status_code == 201


def test_upload_errors_400_404_415(settings: Settings) -> None:
    with client_for(settings) as client:
        cid = new_conversation(client)
        resp = client.post(f"/api/conversations/{cid}/files", data={"dir": "x"})
        assert resp.status_code in (400, 415)
        resp = client.post(
            f"/api/conversations/{cid}/files", files=[("other", ("a.txt", b"a", "text/plain"))]
        )
        assert resp.status_code == 400
        assert "'file'" in error_of(resp)
        resp = upload(client, cid, [("same.txt", b"1"), ("same.txt", b"2")])
        assert resp.status_code == 400
        resp = client.post(f"/api/conversations/{cid}/files", json={"file": "x"})
        assert resp.status_code == 415
        resp = client.post(
            f"/api/conversations/{cid}/files",
            content=b"--b\r\nContent-Disposition: form-data; name=file; filename=a\r\n\r\nxx",
            headers={"content-type": "multipart/form-data; boundary=b"},
        )
        assert resp.status_code in (201, 400)  # a truncated body never gets a 5xx
        assert upload(client, "nope", [("a.txt", b"a")]).status_code == 404


def test_upload_during_a_run_is_409(settings: Settings) -> None:
    wait = "while [ ! -f go ]; do sleep 0.02; done; echo went"
    llm = ScriptedLLM(
        [
            ("planning", plan_reply("Wait")),
            ("thinking", run(wait) + finish("Waited.")),
        ]
    )
    with client_for(settings, llm) as client:
        resp = client.post(
            "/api/agent/run",
            json={"goal": "wait for go", "mode": "agent"},
            headers={"accept": "application/json"},
        )
        assert resp.status_code == 202
        cid, rid = resp.json()["conversation_id"], resp.json()["run_id"]
        ws = workspace_of(settings, cid)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:  # the command is running
            msgs = client.get(f"/api/conversations/{cid}/messages").json()
            if any(m["meta"]["action_type"] == "terminal_run" for m in msgs):
                break
        else:
            raise AssertionError("the command never started")
        resp = upload(client, cid, [("late.txt", b"late")])
        assert resp.status_code == 409
        assert "run is active" in error_of(resp)
        assert not (ws / "late.txt").exists()
        (ws / "go").write_text("")
        with client.stream("GET", f"/api/agent/runs/{rid}/events") as events:
            _, end = collect(events.iter_lines())
        assert end is not None and end["status"] == "completed"
        assert upload(client, cid, [("late.txt", b"late")]).status_code == 201


def test_another_users_conversation_and_run_are_404(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, auth_tokens="alice:tok-a,bob:tok-b", allow_shared_local=True)
    llm = ScriptedLLM([("auto_reply", RuntimeError("boom"))])
    alice = {"authorization": "Bearer tok-a"}
    bob = {"authorization": "Bearer tok-b"}
    with client_for(settings, llm) as client:
        cid = client.post("/api/conversations", json={"title": "mine"}, headers=alice).json()[
            "conversation_id"
        ]
        files = [("file", ("a.txt", b"a", "text/plain"))]
        url = f"/api/conversations/{cid}/files"
        assert client.post(url, files=files, headers=bob).status_code == 404
        assert client.post(url, files=files, headers=alice).status_code == 201
        resp = client.patch(f"/api/conversations/{cid}", json={"title": "x"}, headers=bob)
        assert resp.status_code == 404
        assert client.get("/api/conversations?q=mine", headers=bob).json() == []
        assert len(client.get("/api/conversations?q=mine", headers=alice).json()) == 1
        resp = client.post(
            "/api/agent/run",
            json={"goal": "hi", "mode": "chat", "conversation_id": cid},
            headers={**alice, "accept": "application/json"},
        )
        rid = resp.json()["run_id"]
        with client.stream("GET", f"/api/agent/runs/{rid}/events", headers=alice) as events:
            assert (collect(events.iter_lines())[1] or {}).get("status") == "failed"
        assert client.post(f"/api/agent/runs/{rid}/retry", headers=bob).status_code == 404
        assert client.get(f"/api/conversations/{cid}/files.zip", headers=bob).status_code == 404
        assert client.get("/api/settings").status_code == 401


# -- the planner and thinking learn the uploaded files; titles ---------------------------


def test_planner_and_thinking_are_told_the_uploaded_files_and_the_title_keeps_the_goal(
    settings: Settings,
) -> None:
    llm = ScriptedLLM(
        [
            ("planning", plan_reply("Chart it", prose="I'll analyse data.csv and chart it.")),
            ("thinking", run("wc -l data.csv") + finish("Charted.")),
        ]
    )
    with client_for(settings, llm) as client:
        cid = new_conversation(client)
        assert upload(client, cid, [("data.csv", b"a,b\n1,2\n")]).status_code == 201
        _, end, _ = post_run(
            client, {"goal": "analyse the data and chart it", "conversation_id": cid}
        )
        assert end["status"] == "completed", llm.errors
        planning, thinking = llm.calls
        assert "The user provided these files" in planning.messages[0]["content"]
        assert "- data.csv" in planning.messages[0]["content"]
        assert "Files the user provided" in thinking.messages[1]["content"]
        # the person's words, not the planner's sentence ("Analyse data.csv and chart it")
        assert client.get(f"/api/conversations/{cid}").json()["title"] == (
            "analyse the data and chart it"
        )


def test_a_title_a_person_chose_is_kept_and_a_plan_sentence_never_renames(
    settings: Settings,
) -> None:
    llm = ScriptedLLM(
        [
            ("planning", plan_reply("A", prose="I'll write the report for you.")),
            ("thinking", finish("ok")),
            ("planning", plan_reply("B", prose="I'll do it.")),
            ("thinking", finish("ok")),
        ]
    )
    with client_for(settings, llm) as client:
        cid = new_conversation(client, title="My report")
        post_run(client, {"goal": "write report", "conversation_id": cid, "mode": "agent"})
        assert client.get(f"/api/conversations/{cid}").json()["title"] == "My report"
        _, end, _ = post_run(client, {"goal": "write a python thing", "mode": "agent"})
        title = client.get(f"/api/conversations/{end['conversation_id']}").json()["title"]
        assert title == "write a python thing"


def test_zip_is_named_after_the_title_safely(settings: Settings) -> None:
    with client_for(settings) as client:
        cid = new_conversation(client, title='Ventes "été" / 2026: rapport')
        assert upload(client, cid, [("a.txt", b"a")]).status_code == 201
        resp = client.get(f"/api/conversations/{cid}/files.zip")
        assert resp.status_code == 200
        disposition = resp.headers["content-disposition"]
        assert disposition.startswith('attachment; filename="Ventes _t_ 2026 rapport.zip"')
        assert "filename*=UTF-8''Ventes%20%C3%A9t%C3%A9%202026%20rapport.zip" in disposition
        untitled = new_conversation(client)
        disposition = client.get(f"/api/conversations/{untitled}/files.zip").headers[
            "content-disposition"
        ]
        assert f"{untitled}.zip" in disposition


# -- settings and the model check --------------------------------------------------------


def test_settings_say_what_the_ui_needs(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, llm_models="scripted/model, other/model")
    with client_for(settings) as client:
        body = client.get("/api/settings").json()
        assert body["model"] == "scripted/model"
        assert body["models"] == ["scripted/model", "other/model"]
        assert body["runtimes"] == ["local"]
        assert body["auth"] is False
        assert body["upload_max_mb"] == 50
        assert body["workspace_max_mb"] == 1024
        assert body["approval"] == "never"
        assert body["approval_modes"] == ["never", "risky", "always"]


def test_settings_name_the_servers_approval_mode(tmp_path: Path) -> None:
    with client_for(make_settings(tmp_path, approval_mode="risky")) as client:
        assert client.get("/api/settings").json()["approval"] == "risky"


def test_model_check_ok_and_failing_in_plain_words(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, llm_models="other/model")
    llm = ScriptedLLM(
        [
            ("check", "<think>17 + 25 ...</think>The answer is 42."),
            ("check", LLMConfigError("The provider rejected the credentials: check LLM_API_KEY")),
            ("check", ""),
            ("check", "What is 17 plus 25? Reply with the number only."),  # an echo
            ("check", "OK"),  # text came back, but no answer
        ]
    )
    with client_for(settings, llm) as client:
        body = client.post("/api/llm/check", json={}).json()
        assert body["ok"] is True and body["model"] == "scripted/model"
        assert isinstance(body["latency_ms"], int) and "error" not in body
        assert body["answer"] == "The answer is 42."
        body = client.post("/api/llm/check", json={"model": "other/model"}).json()
        assert body["ok"] is False
        assert "check LLM_API_KEY" in body["error"]
        assert llm.calls[1].model == "other/model"
        body = client.post("/api/llm/check").json()  # no body at all is fine
        assert body["ok"] is False and "empty" in body["error"]
        for said in ("What is 17 plus 25? Reply with the number only.", "OK"):
            body = client.post("/api/llm/check", json={}).json()
            assert body["ok"] is False and body["answer"] == said
            assert body["error"].startswith("The model answered, but not what it was asked")
        resp = client.post("/api/llm/check", json={"model": "not/offered"})
        assert resp.status_code == 400
        assert "scripted/model, other/model" in error_of(resp)
        assert (
            client.post(
                "/api/llm/check", content=b"[1]", headers={"Content-Type": "application/json"}
            ).status_code
            == 400
        )
        assert len(llm.calls) == 5


def test_model_check_without_a_model_says_what_to_set_and_to_restart(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, llm_model=None)
    with client_for(settings) as client:
        body = client.post("/api/llm/check", json={}).json()
        assert body["ok"] is False
        assert "LLM_MODEL" in body["error"] and "restart" in body["error"]
        assert client.get("/api/settings").json()["model"] is None


def test_run_with_a_picked_model_uses_it_and_an_unknown_model_is_400(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, llm_models="scripted/model,other/model")
    llm = ScriptedLLM([("auto_reply", "hi")])
    with client_for(settings, llm) as client:
        resp = client.post("/api/agent/run", json={"goal": "hi", "model": "bad/one"})
        assert resp.status_code == 400 and "'model'" in error_of(resp)
        resp = client.post("/api/agent/run", json={"goal": "hi", "model": 3})
        assert resp.status_code == 400
        assert client.get("/api/conversations").json() == []
        _, end, _ = post_run(client, {"goal": "hi", "mode": "chat", "model": "other/model"})
        assert end["status"] == "completed"
        assert [c.model for c in llm.calls] == ["other/model"]


def test_no_model_error_says_a_restart_is_needed(tmp_path: Path) -> None:
    from backend.llm.client import LiteLLM

    settings = make_settings(tmp_path, llm_model=None)
    app = create_app(settings, llm=LiteLLM(None))
    with TestClient(app) as client:
        messages, end, _ = post_run(client, {"goal": "hi", "mode": "chat"})
    assert end["status"] == "failed"
    (error,) = [m for m in messages if m["meta"]["action_type"] == "error"]
    assert "LLM_MODEL" in error["content"] and "restart" in error["content"]


# -- retry -------------------------------------------------------------------------------


def test_retry_a_failed_run_in_the_same_conversation(settings: Settings) -> None:
    llm = ScriptedLLM(
        [
            *[("planning", "no plan")] * 3,
            ("planning", plan_reply("Write")),
            ("thinking", write("a.txt", "a\n") + finish("Wrote a.txt.")),
        ]
    )
    with client_for(settings, llm) as client:
        _, end, headers = post_run(client, {"goal": "write a file", "mode": "agent"})
        assert end["status"] == "failed"
        rid, cid = headers["x-run-id"], headers["x-conversation-id"]
        messages, end2, headers2 = post_run(client, {}, f"/api/agent/runs/{rid}/retry")
        assert end2["status"] == "completed", llm.errors
        assert headers2["x-conversation-id"] == cid and headers2["x-run-id"] != rid
        assert messages[0]["meta"]["action_type"] == "question"
        assert messages[0]["content"] == "write a file"
        runs = client.get(f"/api/conversations/{cid}").json()["runs"]
        assert [(r["goal"], r["mode"], r["status"]) for r in runs] == [
            ("write a file", "agent", "failed"),
            ("write a file", "agent", "completed"),
        ]
        resp = client.post(f"/api/agent/runs/{headers2['x-run-id']}/retry")
        assert resp.status_code == 409 and "completed" in error_of(resp)
        assert client.post("/api/agent/runs/nope/retry").status_code == 404
        resp = client.post(f"/api/agent/runs/{rid}/retry", json={"model": "x/y"})
        assert resp.status_code == 400


def test_retry_answers_json_when_asked(settings: Settings) -> None:
    llm = ScriptedLLM([("auto_reply", RuntimeError("down")), ("auto_reply", "fine")])
    with client_for(settings, llm) as client:
        _, end, headers = post_run(client, {"goal": "hi", "mode": "chat"})
        assert end["status"] == "failed"
        resp = client.post(
            f"/api/agent/runs/{headers['x-run-id']}/retry",
            headers={"accept": "application/json"},
        )
        assert resp.status_code == 202
        assert resp.json()["conversation_id"] == headers["x-conversation-id"]
        rid = resp.json()["run_id"]
        with client.stream("GET", f"/api/agent/runs/{rid}/events") as events:
            assert (collect(events.iter_lines())[1] or {}).get("status") == "completed"


# -- details: workspace paths in results, log lines --------------------------------------


def test_results_show_workspace_relative_paths_not_the_servers(tmp_path: Path) -> None:
    # unsandboxed, commands see the server's folder (under bubblewrap it is /workspace)
    settings = make_settings(tmp_path, local_sandbox="off")
    llm = ScriptedLLM(
        [
            ("planning", plan_reply("Run it")),
            (
                "thinking",
                write("bad.py", "import os\nprint(os.getcwd())\nraise ValueError('no')\n")
                + run("python3 bad.py"),
            ),
            ("thinking", finish("It fails.")),
        ]
    )
    with client_for(settings, llm) as client:
        messages, _, headers = post_run(client, {"goal": "run bad.py", "mode": "agent"})
    ws = str(workspace_of(settings, headers["x-conversation-id"]))
    (result,) = [
        m
        for m in messages
        if m["meta"]["action_type"] == "terminal_run" and m["status"] != "running"
    ]
    assert 'File "bad.py", line 3' in result["content"]
    assert "\n.\n" in "\n" + result["content"]  # os.getcwd() printed as "."
    assert not any(ws in json.dumps(m) for m in messages)


def test_one_log_line_at_run_start_and_end(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    llm = ScriptedLLM([("auto_reply", "hi")])
    with caplog.at_level(logging.INFO), client_for(settings, llm) as client:
        _, _end, headers = post_run(client, {"goal": "hi", "mode": "chat"})
    rid, cid = headers["x-run-id"], headers["x-conversation-id"]
    lines = [r.getMessage() for r in caplog.records if r.name == "planact.runs"]
    assert lines[0].startswith(f"run {rid} started: conversation {cid}, mode chat")
    assert lines[1].startswith(
        f"run {rid} ended: conversation {cid}, status completed, 1 model calls, 15 tokens, "
    )
    assert len(lines) == 2
    # RUNTIME=local: no advice to "set RUNTIME=local" at start-up
    assert not [
        r for r in caplog.records if "RUNTIME=local" in r.getMessage() and r.levelno >= logging.INFO
    ]
