"""Every 4xx of the contract, and the auth rules, against the real server."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.agent.scripts import finish, plan_reply
from tests.e2e.server import PLANACT, PROCESS_DEADLINE, Server, server_env, wait_for
from tests.fakellm import FakeModelServer

pytestmark = pytest.mark.e2e

TOKEN = "s3cret-token"
OTHER = "other-token"


@pytest.fixture(scope="module")
def model() -> Iterator[FakeModelServer]:
    server = FakeModelServer().start()
    yield server
    for name in list(server.model.holds):
        server.release(name)
    server.stop()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, model: FakeModelServer) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("auth")
    env = server_env(
        tmp, model.base_url, AUTH_TOKEN=TOKEN, AUTH_TOKENS=f"bob:{OTHER}", ALLOW_SHARED_LOCAL="1"
    )
    srv = Server(tmp, env).start()
    yield srv
    srv.stop()


def auth(token: str = TOKEN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def error_of(resp: httpx.Response, status: int, code: str) -> str:
    assert resp.status_code == status, resp.text
    body = resp.json()
    assert set(body) == {"error"} and body["error"]["code"] == code
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    return str(body["error"]["message"])


def start(server: Server, body: dict[str, object], token: str = TOKEN) -> httpx.Response:
    return httpx.post(
        f"{server.url}/api/agent/run",
        json=body,
        headers={**auth(token), "Accept": "application/json"},
        timeout=30,
    )


def test_health_is_open_and_everything_else_needs_the_token(server: Server) -> None:
    assert httpx.get(f"{server.url}/api/health").json()["status"] == "ok"
    for method, path in [
        ("GET", "/api/conversations"),
        ("POST", "/api/agent/run"),
        ("GET", "/api/conversations/x/messages"),
        ("GET", "/api/files/x/y.txt"),
        ("GET", "/api/agent/runs/x/events"),
        ("POST", "/api/agent/runs/x/stop"),
        ("DELETE", "/api/conversations/x"),
    ]:
        r = httpx.request(method, f"{server.url}{path}")
        error_of(r, 401, "unauthorized")
        r = httpx.request(method, f"{server.url}{path}", headers=auth("wrong"))
        error_of(r, 401, "unauthorized")
    assert httpx.get(f"{server.url}/api/conversations", headers=auth()).status_code == 200
    r = httpx.get(f"{server.url}/api/conversations?access_token={TOKEN}")
    assert r.status_code == 200


def test_bad_requests(server: Server) -> None:
    url = f"{server.url}/api/agent/run"
    h = {**auth(), "Accept": "application/json"}
    hj = {**h, "Content-Type": "application/json"}
    error_of(httpx.post(url, content=b"{not json", headers=hj), 400, "invalid_request")
    error_of(httpx.post(url, content=b"[1, 2]", headers=hj), 400, "invalid_request")
    # a JSON body declared as something else: 415 (what a cross-site form would send)
    error_of(
        httpx.post(url, content=b'{"goal": "x"}', headers={**h, "Content-Type": "text/plain"}),
        415,
        "unsupported_media_type",
    )
    assert "goal" in error_of(httpx.post(url, json={}, headers=h), 400, "invalid_request")
    error_of(httpx.post(url, json={"goal": "   "}, headers=h), 400, "invalid_request")
    error_of(httpx.post(url, json={"goal": 5}, headers=h), 400, "invalid_request")
    msg = error_of(
        httpx.post(url, json={"goal": "x", "mode": "turbo"}, headers=h), 400, "invalid_request"
    )
    assert "mode" in msg
    error_of(
        httpx.post(url, json={"goal": "x", "runtime": "vm"}, headers=h), 400, "invalid_request"
    )
    error_of(
        httpx.post(url, json={"goal": "x", "conversation_id": 7}, headers=h), 400, "invalid_request"
    )
    r = httpx.get(f"{server.url}/api/agent/runs/x/events?after=abc", headers=auth())
    assert r.status_code in (400, 404)


def test_too_large(server: Server) -> None:
    url = f"{server.url}/api/agent/run"
    h = {**auth(), "Accept": "application/json"}
    assert "100000" in error_of(
        httpx.post(url, json={"goal": "x" * 100_001}, headers=h), 413, "too_large"
    ).replace(",", "")
    error_of(
        httpx.post(url, json={"goal": "x", "pad": "y" * 2_000_000}, headers=h), 413, "too_large"
    )
    before = httpx.get(f"{server.url}/api/conversations", headers=auth()).json()
    assert all(c["title"] != "x" * 80 for c in before)


def test_unknown_ids_and_other_users_ids_are_404(server: Server, model: FakeModelServer) -> None:
    model.script(
        {"stage": "planning", "content": plan_reply("One")},
        {
            "stage": "thinking",
            "content": "<write_code><path>f.txt</path><content>hi</content>"
            "</write_code>" + finish("ok"),
        },
    )
    r = start(server, {"goal": "write code"})
    assert r.status_code == 202
    cid, rid = r.json()["conversation_id"], r.json()["run_id"]
    wait_for(
        lambda: (
            httpx.get(f"{server.url}/api/conversations/{cid}", headers=auth()).json()["status"]
            == "completed"
        ),
        what="run to complete",
    )
    assert httpx.get(f"{server.url}/api/files/{cid}/f.txt", headers=auth()).content == b"hi"
    for token in (TOKEN, OTHER):
        for path in (
            "/api/conversations/nope",
            "/api/conversations/nope/messages",
            "/api/conversations/nope/files",
            "/api/conversations/nope/files.zip",
            "/api/agent/runs/nope/events",
            "/api/files/nope/f.txt",
            f"/api/files/{cid}/missing.txt",
            "/api/no/such/route",
        ):
            error_of(httpx.get(f"{server.url}{path}", headers=auth(token)), 404, "not_found")
    # bob sees none of the default user's things
    for method, path in [
        ("GET", f"/api/conversations/{cid}"),
        ("GET", f"/api/conversations/{cid}/messages"),
        ("GET", f"/api/conversations/{cid}/files"),
        ("GET", f"/api/conversations/{cid}/files.zip"),
        ("GET", f"/api/files/{cid}/f.txt"),
        ("GET", f"/api/agent/runs/{rid}/events"),
        ("POST", f"/api/agent/runs/{rid}/stop"),
        ("DELETE", f"/api/conversations/{cid}"),
    ]:
        error_of(
            httpx.request(method, f"{server.url}{path}", headers=auth(OTHER)), 404, "not_found"
        )
    error_of(start(server, {"goal": "x", "conversation_id": cid}, OTHER), 404, "not_found")
    assert httpx.get(f"{server.url}/api/conversations", headers=auth(OTHER)).json() == []
    # and the owner still has everything
    assert httpx.get(f"{server.url}/api/files/{cid}/f.txt", headers=auth()).content == b"hi"
    error_of(start(server, {"goal": "x", "conversation_id": "nope"}), 404, "not_found")


def test_second_run_in_a_conversation_is_409(server: Server, model: FakeModelServer) -> None:
    model.script(
        {"stage": "planning", "content": plan_reply("Hold")},
        {"stage": "thinking", "content": finish("ok"), "hold": "409"},
        {"stage": "planning", "content": plan_reply("Next")},
        {"stage": "thinking", "content": finish("ok")},
    )
    r = start(server, {"goal": "write code"})
    cid = r.json()["conversation_id"]
    msg = error_of(start(server, {"goal": "write code", "conversation_id": cid}), 409, "conflict")
    assert "active" in msg
    model.release("409")
    wait_for(
        lambda: (
            httpx.get(f"{server.url}/api/conversations/{cid}", headers=auth()).json()["status"]
            == "completed"
        ),
        what="first run to end",
    )
    assert start(server, {"goal": "write code", "conversation_id": cid}).status_code == 202


def test_delete_removes_conversation_messages_and_workspace(
    server: Server, model: FakeModelServer
) -> None:
    model.script(
        {"stage": "planning", "content": plan_reply("One")},
        {
            "stage": "thinking",
            "content": "<write_code><path>d.txt</path><content>d</content>"
            "</write_code>" + finish("ok"),
        },
    )
    cid = start(server, {"goal": "write code"}).json()["conversation_id"]
    wait_for(
        lambda: (
            httpx.get(f"{server.url}/api/conversations/{cid}", headers=auth()).json()["status"]
            == "completed"
        ),
        what="run to complete",
    )
    ws = server.workdir / "workspace" / "user_1" / f"Conversation_{cid}"
    assert (ws / "d.txt").read_text() == "d"
    assert httpx.delete(f"{server.url}/api/conversations/{cid}", headers=auth()).status_code == 200
    error_of(httpx.get(f"{server.url}/api/conversations/{cid}", headers=auth()), 404, "not_found")
    error_of(
        httpx.get(f"{server.url}/api/conversations/{cid}/messages", headers=auth()),
        404,
        "not_found",
    )
    assert not ws.exists()


def test_refuses_non_loopback_bind_without_token(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    proc = subprocess.run(
        [PLANACT, "serve", "--host", "0.0.0.0", "--port", "1"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=PROCESS_DEADLINE,
    )
    assert proc.returncode == 2
    assert "AUTH_TOKEN" in proc.stderr


def test_a_broken_mcp_servers_file_stops_serve_with_a_clear_message(tmp_path: Path) -> None:
    servers = tmp_path / "mcp.json"
    servers.write_text('{"mcpServers": {"calc": {"command": "x", "url": "http://h"}}}')
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "MCP_SERVERS_FILE": str(servers)}
    proc = subprocess.run(
        [PLANACT, "serve", "--port", "1"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=PROCESS_DEADLINE,
    )
    assert proc.returncode == 2, proc.stderr
    assert "calc" in proc.stderr and "Traceback" not in proc.stderr


def test_query_token_is_accepted_on_get_only(server: Server) -> None:
    """A token in a URL ends up in logs and history: only GET (links, EventSource) takes it."""
    before = httpx.get(f"{server.url}/api/conversations", headers=auth()).json()
    q = f"?access_token={TOKEN}"
    assert httpx.get(f"{server.url}/api/conversations{q}").status_code == 200
    for method, path in [
        ("POST", "/api/agent/run"),
        ("POST", "/api/agent/runs/" + "0" * 32 + "/stop"),
        ("DELETE", f"/api/conversations/{before[0]['conversation_id'] if before else 'x'}"),
    ]:
        r = httpx.request(
            method,
            f"{server.url}{path}{q}",
            json={"goal": "x", "mode": "chat"} if path.endswith("/run") else None,
            headers={"Accept": "application/json"},
        )
        assert "GET" in error_of(r, 401, "unauthorized")
    assert httpx.get(f"{server.url}/api/conversations", headers=auth()).json() == before
