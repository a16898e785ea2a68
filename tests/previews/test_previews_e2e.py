"""A scripted model writes a small app (a page, an API route, a WebSocket echo), previews it,
and the test uses it over the preview URL, in each sandboxed runtime (docs/api.md
"Previews")."""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
from pathlib import Path

import httpx
import pytest
from pydantic import TypeAdapter
from websockets.sync.client import connect

from backend.api.previews import PreviewOut
from tests.agent.scripts import run, write
from tests.e2e.server import wait_for
from tests.fakellm import FakeModelServer
from tests.support.previews import (
    RUNTIMES,
    PreviewServer,
    app_script,
    done,
    preview_message,
    preview_tag,
    processes_with,
    start_app,
    start_preview_server,
    write_app,
)
from tests.support.sandboxes import remove_sandboxes_under

pytestmark = pytest.mark.e2e


REACH = (
    'python3 -c "import socket, sys\n'
    "try:\n    socket.create_connection(('127.0.0.1', int(sys.argv[1])), 2)\n"
    "    print('API REACHED')\n"
    "except OSError as exc:\n    print('API unreachable:', exc)\" {port}; "
)


def test_a_previewed_app_serves_its_page_api_uploads_and_websocket(
    preview_server: PreviewServer, fake_model: FakeModelServer
) -> None:
    ps = preview_server
    marker = f"pv{secrets.token_hex(6)}"
    cid, url = start_app(ps, fake_model, marker, REACH.format(port=ps.server.port))
    with httpx.Client(timeout=30) as c:
        page = c.get(url)
        assert page.status_code == 200 and "sample app" in page.text
        api = c.get(url + "api/hello?x=1")
        assert api.status_code == 200
        assert api.headers["x-app"] == "sample"
        seen = api.json()
        assert seen["hello"] == "preview" and seen["path"] == "/api/hello?x=1"
        assert seen["prefix"] == "/p/" + url.split("/p/")[1].rstrip("/")
        assert c.get(url + "teapot").status_code == 418  # the app's own status
        body = os.urandom(3_000_000)
        up = c.post(url + "upload", content=body).json()
        assert up == {"size": len(body), "sha256": hashlib.sha256(body).hexdigest()}
        big = c.request("PUT", url + "big/5000000")
        assert len(big.content) == 5_000_000
        # a page's absolute path is routed by its Referer
        by_ref = c.get(ps.preview_base + "/api/hello", headers={"referer": url})
        assert by_ref.json()["path"] == "/api/hello"
    with connect(url.replace("http", "ws", 1) + "ws") as ws:
        ws.send("echo me")
        assert ws.recv(timeout=10) == "echo me"
        ws.send(b"\x00\x01bytes")
        assert ws.recv(timeout=10) == b"\x00\x01bytes"
    with ps.server.client() as api_client:
        answer = api_client.get(f"/api/conversations/{cid}/previews")
        listed = answer.json()
        # the answer is exactly the listed model's dump (the web UI's generated PreviewOut)
        previews = TypeAdapter(list[PreviewOut]).validate_json(answer.content, strict=True)
        assert [p.model_dump() for p in previews] == listed
        assert [(p["name"], p["port"], p["state"]) for p in listed] == [("app", 8080, "ready")]
        assert listed[0]["url"] == url
        assert any("listening on 8080" in line for line in listed[0]["log"])
        assert any("request GET /api/hello?x=1" in line for line in listed[0]["log"])
        # the service reached nothing of the host: not even the API's port
        assert any("API unreachable" in line for line in listed[0]["log"]), listed[0]["log"]
        assert not any("API REACHED" in line for line in listed[0]["log"])
    assert processes_with(marker)  # it outlived its action and its run


def test_wrong_tokens_get_404(preview_server: PreviewServer, fake_model: FakeModelServer) -> None:
    ps = preview_server
    _cid, url = start_app(ps, fake_model, f"pv{secrets.token_hex(6)}")
    token = url.split("/p/")[1].rstrip("/")
    with httpx.Client(timeout=30) as c:
        assert c.get(url).status_code == 200
        forged = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
        assert c.get(f"{ps.preview_base}/p/{forged}/").status_code == 404
        assert c.get(f"{ps.preview_base}/p/{secrets.token_urlsafe(24)}/").status_code == 404
        assert c.get(f"{ps.preview_base}/").status_code == 404
        # the API's origin does not serve previews
        assert c.get(f"{ps.server.url}/p/{token}/").status_code == 404


def test_stop_and_restart(preview_server: PreviewServer, fake_model: FakeModelServer) -> None:
    ps = preview_server
    marker = f"pv{secrets.token_hex(6)}"
    cid, url = start_app(ps, fake_model, marker)
    assert processes_with(marker)
    with ps.server.client() as api:
        stopped = api.post(f"/api/conversations/{cid}/previews/app/stop")
        assert stopped.status_code == 200 and stopped.json()["state"] == "stopped"
        assert processes_with(marker) == []
        assert httpx.get(url, timeout=10).status_code == 404
        restarted = api.post(f"/api/conversations/{cid}/previews/app/restart").json()
        assert restarted["state"] == "ready"
        assert processes_with(marker)
        assert httpx.get(restarted["url"] + "api/hello", timeout=10).json()["hello"] == "preview"
        assert api.post(f"/api/conversations/{cid}/previews/nope/stop").status_code == 404
        # delete: the conversation's services stop with it
        assert api.delete(f"/api/conversations/{cid}").status_code in (200, 204)
    wait_for(lambda: processes_with(marker) == [], 20, "the service to stop on delete")


def test_the_file_listing_gives_html_pages_a_preview_url(
    preview_server: PreviewServer, fake_model: FakeModelServer, tmp_path: Path
) -> None:
    ps = preview_server
    page = "<html><body><p id=t>static</p><script src='js/app.js'></script></body></html>"
    app_script(
        fake_model,
        write("site/index.html", page)
        + write("site/js/app.js", "document.getElementById('t').textContent = 'scripted';\n")
        + done(),
    )
    _messages, end, headers = ps.server.run({"goal": "Make a page"})
    assert end["status"] == "completed"
    cid = headers["x-conversation-id"]
    with ps.server.client() as api:
        listed = {f["filepath"]: f for f in api.get(f"/api/conversations/{cid}/files").json()}
    assert "preview_url" not in listed["site/js/app.js"]
    url = listed["site/index.html"]["preview_url"]
    assert url.startswith(ps.preview_base + "/p/") and url.endswith("/site/index.html")
    with httpx.Client(timeout=30) as c:
        got = c.get(url)
        assert got.status_code == 200 and "static" in got.text
        assert got.headers["content-type"].startswith("text/html")
        script = c.get(url.rsplit("/", 1)[0] + "/js/app.js")
        assert "scripted" in script.text
        assert c.get(url.rsplit("/", 1)[0] + "/../../../etc/passwd").status_code == 404
        assert c.post(url).status_code == 405


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_a_killed_owner_leaves_no_service_and_its_previews_read_stopped(
    runtime: str, tmp_path: Path, fake_model: FakeModelServer
) -> None:
    marker = f"pv{secrets.token_hex(6)}"
    servers = start_preview_server(runtime, tmp_path, fake_model, LEASE_SECONDS="2")
    ps = next(servers)
    try:
        cid, url = start_app(ps, fake_model, marker)
        assert processes_with(marker)
        ps.server.kill9()
        wait_for(lambda: processes_with(marker) == [], 30, "the service to die with its owner")
    finally:
        with contextlib.suppress(StopIteration):
            next(servers)
    again = start_preview_server(runtime, tmp_path, fake_model, LEASE_SECONDS="2")
    ps2 = next(again)
    try:
        with ps2.server.client() as api:
            listed = wait_for(
                lambda: [
                    p
                    for p in api.get(f"/api/conversations/{cid}/previews").json()
                    if p["state"] == "stopped"
                ],
                30,
                "the dead owner's preview to read stopped",
            )
            assert listed[0]["name"] == "app"
            assert "the process that ran it ended" in listed[0]["log"][-1]  # it says why
            # its address on the new server's origin answers 404 (not 502) while it is down
            address = url.removeprefix(ps.preview_base)
            assert httpx.get(ps2.preview_base + address, timeout=10).status_code == 404
            restarted = api.post(f"/api/conversations/{cid}/previews/app/restart").json()
            assert restarted["state"] == "ready"
            assert processes_with(marker)
            # a restart keeps the preview's address: the link in the transcript works again
            assert restarted["url"] == ps2.preview_base + address
            got = httpx.get(restarted["url"] + "api/hello", timeout=10)
            assert got.json()["hello"] == "preview"
    finally:
        with contextlib.suppress(StopIteration):
            next(again)
        if runtime == "docker":
            # the killed owner's sandbox is reaped by a live server once the dead lease is
            # LEASE_SECONDS old and owns no run (backend/runs/lease.py): the second server
            # may stop before that, and no server is left to do it
            remove_sandboxes_under(tmp_path)
    assert processes_with(marker) == []  # the server's stop stopped it


def test_a_service_outlives_the_commands_run_after_it(
    preview_server: PreviewServer, fake_model: FakeModelServer
) -> None:
    """The sandbox's clean-up after a command (every process of the sandbox user is killed)
    leaves the preview's service alone."""
    ps = preview_server
    marker = f"pv{secrets.token_hex(6)}"
    app_script(
        fake_model,
        write_app() + preview_tag(8080, f"python3 app.py 8080 {marker}", name="app"),
        run("sleep 0.2 & echo after-the-preview"),
        done(),
    )
    messages, end, _headers = ps.server.run({"goal": "Build me an app, then run a command"})
    assert end["status"] == "completed"
    url = preview_message(messages)["meta"]["json"][0]["url"]
    outputs = [m for m in messages if m["meta"]["action_type"] == "terminal_run"]
    assert any("after-the-preview" in m["content"] for m in outputs)
    assert httpx.get(url + "api/hello", timeout=10).json()["hello"] == "preview"
    assert processes_with(marker)
