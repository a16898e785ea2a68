"""Checkpoints black-box (docs/api.md "Every step is a place to go back to"): real
`planact serve` processes with the fake model over HTTP and the real sandbox. Share links
read with no login and refuse every write; 409 while a run is active or waiting; another
user's conversation is 404; a restart keeps them; a symlink a command planted is never
followed, neither when checkpointed nor when restored."""

from __future__ import annotations

import os
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.agent.scripts import finish, plan_reply, run, write
from tests.e2e.server import PLANACT, Server, server_env, wait_for
from tests.e2e.waiting import pending
from tests.fakellm import FakeModelServer
from tests.sse_client import collect

pytestmark = pytest.mark.e2e

TOKEN, OTHER = "owner-token", "bob-token"


def auth(token: str = TOKEN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def server(tmp_path: Path, fake_model: FakeModelServer) -> Iterator[Server]:
    env = server_env(
        tmp_path,
        fake_model.base_url,
        AUTH_TOKEN=TOKEN,
        AUTH_TOKENS=f"bob:{OTHER}",
        ALLOW_SHARED_LOCAL="1",
        APPROVAL_MODE="never",
    )
    s = Server(tmp_path, env).start()
    try:
        yield s
    finally:
        s.stop()


def client(server: Server, token: str | None = TOKEN) -> httpx.Client:
    return server.client(headers=auth(token) if token else {})


def follow(server: Server, run_id: str) -> tuple[list[dict[str, Any]], Any]:
    with client(server) as c, c.stream("GET", f"/api/agent/runs/{run_id}/events") as r:
        assert r.status_code == 200
        return collect(r.iter_lines())


def run_to_end(server: Server, body: dict[str, Any]) -> tuple[str, str, list[dict[str, Any]]]:
    with client(server) as c:
        ids = c.post("/api/agent/run", json=body, headers={"Accept": "application/json"}).json()
    msgs, end = follow(server, ids["run_id"])
    assert end is not None and end["status"] == "completed", msgs[-3:]
    return ids["conversation_id"], ids["run_id"], msgs


def checkpoints(server: Server, cid: str) -> list[dict[str, Any]]:
    with client(server) as c:
        resp = c.get(f"/api/conversations/{cid}/checkpoints")
        assert resp.status_code == 200, resp.text
        return list(resp.json())


def workspace(tmp: Path, cid: str) -> Path:
    return tmp / "workspace" / "user_1" / f"Conversation_{cid}"


def tree(root: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            out[rel] = ("link", str(path.readlink()))
        elif path.is_file():
            out[rel] = path.read_bytes()
    return out


def script_files(fake: FakeModelServer) -> None:
    fake.script(
        {"stage": "planning", "content": plan_reply("Files")},
        {"stage": "thinking", "content": write("notes.txt", "first\n")},
        {"stage": "thinking", "content": run("printf '\\x00\\x01\\xff' > blob.bin")},
        {"stage": "thinking", "content": finish("done")},
    )


def test_a_share_link_reads_without_login_refuses_every_write_and_is_revoked_at_once(
    tmp_path: Path, server: Server, fake_model: FakeModelServer
) -> None:
    script_files(fake_model)
    cid, rid, msgs = run_to_end(server, {"goal": "make files"})
    with client(server) as c:
        made = c.post(f"/api/conversations/{cid}/share")
        assert made.status_code == 201, made.text
    token = made.json()["token"]
    assert made.json()["url"] == f"/shared/{token}"
    with client(server, None) as anon:
        view = anon.get(f"/api/shared/{token}")
        assert view.status_code == 200, view.text
        body = view.json()
        assert set(body) == {"conversation", "messages", "files"}
        assert [m["seq"] for m in body["messages"]] == [m["seq"] for m in msgs]
        assert {f["filepath"] for f in body["files"]} == {"notes.txt", "blob.bin"}
        blob = anon.get(f"/api/shared/{token}/files/blob.bin")
        assert blob.status_code == 200 and blob.content == b"\x00\x01\xff"
        assert anon.get(f"/api/shared/{token}/files/../planact.db").status_code == 404
        assert anon.get(f"/api/shared/{token}/files/nope.txt").status_code == 404
        assert anon.get("/api/shared/not-a-token").status_code == 404
    # (a plain client: some of these routes and methods do not exist, by design)
    with httpx.Client(base_url=server.url, timeout=60) as anon:
        # the token is no credential anywhere else: every write (and every other read) refused
        writes = [
            ("POST", "/api/agent/run", {"goal": "x", "conversation_id": cid}),
            ("POST", f"/api/agent/runs/{rid}/stop", None),
            ("POST", f"/api/agent/runs/{rid}/retry", None),
            ("POST", f"/api/agent/runs/{rid}/approvals/x", {"decision": "approve"}),
            ("POST", f"/api/conversations/{cid}/rewind", {"seq": msgs[-1]["seq"]}),
            ("POST", f"/api/conversations/{cid}/fork", {"seq": msgs[-1]["seq"]}),
            ("POST", f"/api/conversations/{cid}/share", None),
            ("DELETE", f"/api/conversations/{cid}/share", None),
            ("DELETE", f"/api/conversations/{cid}", None),
            ("PATCH", f"/api/conversations/{cid}", {"title": "mine"}),
            ("POST", f"/api/conversations/{cid}/previews/web/stop", None),
            ("POST", f"/api/shared/{token}", None),
            ("DELETE", f"/api/shared/{token}", None),
            ("GET", f"/api/conversations/{cid}/messages", None),
            ("GET", "/api/settings", None),
        ]
        for method, path, payload in writes:
            for headers, params in ((auth(token), {}), ({}, {"access_token": token})):
                resp = anon.request(method, path, json=payload, headers=headers, params=params)
                assert resp.status_code in (401, 405), (method, path, resp.status_code)
        upload = anon.post(
            f"/api/conversations/{cid}/files", files={"files": ("x.txt", b"x")}, headers=auth(token)
        )
        assert upload.status_code == 401
    # a snapshot: what changes after it is not in the link
    fake_model.script(
        {"stage": "planning", "content": plan_reply("More")},
        {"stage": "thinking", "content": write("later.txt", "later\n")},
        {"stage": "thinking", "content": finish("more")},
    )
    run_to_end(server, {"goal": "more", "conversation_id": cid})
    assert (workspace(tmp_path, cid) / "later.txt").exists()
    with client(server, None) as anon:
        again = anon.get(f"/api/shared/{token}").json()
        assert {f["filepath"] for f in again["files"]} == {"notes.txt", "blob.bin"}
        assert len(again["messages"]) == len(msgs)
    with client(server) as c:
        second = c.post(f"/api/conversations/{cid}/share").json()["token"]
        revoked = c.delete(f"/api/conversations/{cid}/share")
        assert revoked.status_code == 200 and revoked.json() == {"revoked": 2}
    with client(server, None) as anon:
        for t in (token, second):
            assert anon.get(f"/api/shared/{t}").status_code == 404
            assert anon.get(f"/api/shared/{t}/files/notes.txt").status_code == 404


def test_rewind_is_refused_while_a_run_is_active_or_waiting_and_fork_is_not(
    tmp_path: Path, server: Server, fake_model: FakeModelServer
) -> None:
    script_files(fake_model)
    cid, _rid, _msgs = run_to_end(server, {"goal": "make files"})
    first = checkpoints(server, cid)[0]["seq"]
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Slow"), "hold": "plan"},
        {"stage": "thinking", "content": finish("ok")},
    )
    with client(server) as c:
        ids = c.post(
            "/api/agent/run",
            json={"goal": "slow", "conversation_id": cid},
            headers={"Accept": "application/json"},
        ).json()
        wait_for(lambda: "plan" in fake_model.model.holds, what="the held planning call")
        busy = c.post(f"/api/conversations/{cid}/rewind", json={"seq": first})
        assert busy.status_code == 409, busy.text
        forked = c.post(f"/api/conversations/{cid}/fork", json={"seq": first})
        assert forked.status_code == 201
    fake_model.release("plan")
    _m, end = follow(server, ids["run_id"])
    assert end["status"] == "completed"
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Ask")},
        {"stage": "thinking", "content": run("echo hi > asked.txt")},
        {"stage": "thinking", "content": finish("asked")},
    )
    with client(server) as c:
        c.post(
            "/api/agent/run",
            json={"goal": "ask first", "conversation_id": cid, "approval": "risky"},
            headers={"Accept": "application/json"},
        )
    pending(server_with_auth(server), cid)
    with client(server) as c:
        waiting = c.post(f"/api/conversations/{cid}/rewind", json={"seq": first})
        assert waiting.status_code == 409


def server_with_auth(server: Server) -> Server:
    """``pending`` reads with ``server.client()``: give it the owner's token."""

    class Authed(Server):
        def client(self, **kwargs: Any) -> httpx.Client:
            return Server.client(self, headers=auth(), **kwargs)

    authed = Authed.__new__(Authed)
    authed.__dict__.update(server.__dict__)
    return authed


def test_another_users_conversation_is_not_found(
    tmp_path: Path, server: Server, fake_model: FakeModelServer
) -> None:
    script_files(fake_model)
    cid, _rid, _msgs = run_to_end(server, {"goal": "make files"})
    seq = checkpoints(server, cid)[0]["seq"]
    with client(server, OTHER) as bob:
        for method, path, body in (
            ("GET", f"/api/conversations/{cid}/checkpoints", None),
            ("GET", f"/api/conversations/{cid}/checkpoints/{seq}/diff", None),
            ("POST", f"/api/conversations/{cid}/rewind", {"seq": seq}),
            ("POST", f"/api/conversations/{cid}/fork", {"seq": seq}),
            ("POST", f"/api/conversations/{cid}/share", None),
            ("DELETE", f"/api/conversations/{cid}/share", None),
        ):
            assert bob.request(method, path, json=body).status_code == 404, (method, path)
    assert len(checkpoints(server, cid)) == 3


def test_checkpoints_survive_a_restart_and_a_planted_symlink_is_never_followed(
    tmp_path: Path, server: Server, fake_model: FakeModelServer
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_bytes(b"not yours\n")
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Links")},
        {"stage": "thinking", "content": write("evil/x.txt", "inside\n")},
        {"stage": "thinking", "content": run(f"rm -rf evil && ln -s {outside} evil")},
        {"stage": "thinking", "content": finish("linked")},
    )
    cid, _rid, _msgs = run_to_end(server, {"goal": "links"})
    ws = workspace(tmp_path, cid)
    cps = checkpoints(server, cid)
    assert len(cps) == 3, cps
    with client(server) as c:
        diff = c.get(
            f"/api/conversations/{cid}/checkpoints/{cps[0]['seq']}/diff",
            params={"to": cps[1]["seq"]},
        ).json()
    # the link is stored as a link: nothing of what it points to is in the checkpoint
    assert sorted((f["path"], f["change"], f["kind"]) for f in diff["files"]) == [
        ("evil", "added", "link"),
        ("evil/x.txt", "removed", "text"),
    ]
    server.stop()
    server.start()  # a restart: the same store and CHECKPOINT_DIR
    assert checkpoints(server, cid) == cps
    with client(server) as c:
        resp = c.post(f"/api/conversations/{cid}/rewind", json={"seq": cps[0]["seq"]})
        assert resp.status_code == 200, resp.text
    assert tree(ws) == {"evil/x.txt": b"inside\n"}
    assert not (ws / "evil").is_symlink()
    assert tree(outside) == {"secret.txt": b"not yours\n"}  # nothing written through the link
    with client(server) as c:
        assert (
            c.post(f"/api/conversations/{cid}/rewind", json={"seq": cps[1]["seq"]}).status_code
            == 200
        )
    assert tree(ws) == {"evil": ("link", str(outside))}
    assert tree(outside) == {"secret.txt": b"not yours\n"}
    # the checkpoint store is beside the workspaces, never in one
    assert not any(".checkpoints" in str(p) for p in ws.rglob("*"))
    assert (tmp_path / "workspace" / ".checkpoints").is_dir()


def planact_run(tmp: Path, model_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **server_env(tmp, model_url)}
    return subprocess.run(
        [PLANACT, "run", *args], cwd=tmp, env=env, capture_output=True, text=True, timeout=120
    )


def test_planact_run_from_a_checkpoint_goes_on_in_a_fork(
    tmp_path: Path, fake_model: FakeModelServer
) -> None:
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Two files")},
        {"stage": "thinking", "content": write("one.txt", "1\n")},
        {"stage": "thinking", "content": write("two.txt", "2\n")},
        {"stage": "thinking", "content": finish("two")},
    )
    first = planact_run(tmp_path, fake_model.base_url, "two files", "--mode", "agent")
    assert first.returncode == 0, first.stdout + first.stderr
    (src_ws,) = (tmp_path / "workspace" / "user_1").iterdir()
    src = src_ws.name.removeprefix("Conversation_")
    with sqlite3.connect(tmp_path / "planact.db") as db:
        seqs = [
            r[0]
            for r in db.execute(
                "SELECT seq FROM checkpoints WHERE conversation_id = ? ORDER BY seq", (src,)
            )
        ]
    assert len(seqs) == 3
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Three")},
        {"stage": "thinking", "content": write("three.txt", "3\n")},
        {"stage": "thinking", "content": finish("three")},
    )
    again = planact_run(
        tmp_path, fake_model.base_url, "three", "--mode", "agent", "--from", f"{src}@{seqs[0]}"
    )
    assert again.returncode == 0, again.stdout + again.stderr
    forks = [p for p in (tmp_path / "workspace" / "user_1").iterdir() if p != src_ws]
    assert len(forks) == 1
    assert tree(forks[0]) == {"one.txt": b"1\n", "three.txt": b"3\n"}
    assert tree(src_ws) == {"one.txt": b"1\n", "two.txt": b"2\n"}
    for bad, why in (
        (f"{src}@99999", "no checkpoint at seq 99999"),
        ("nope", "no conversation nope"),
        ("a/b", "give CONVERSATION or CONVERSATION@SEQ"),
    ):
        refused = planact_run(tmp_path, fake_model.base_url, "x", "--from", bad)
        assert refused.returncode == 2 and why in refused.stderr, refused.stderr
