"""The preview listener shares the API server's process and its logging: the API's access
lines stay as they were, and a preview's requests write none (their path is the token)."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.e2e.server import Server, server_env, wait_for
from tests.fakellm import FakeModelServer
from tests.support.ports import free_port


def test_previews_leave_the_api_access_lines_and_log_no_token(
    tmp_path: Path, fake_model: FakeModelServer
) -> None:
    preview_port = free_port()
    env = server_env(
        tmp_path,
        fake_model.base_url,
        PREVIEW_URL=f"http://127.0.0.1:{preview_port}",
        LOCAL_SANDBOX="off",
    )
    del env["LOG_LEVEL"]  # the default a person gets: access lines included
    server = Server(tmp_path, env).start()
    try:
        with server.client() as c:
            cid = c.post("/api/conversations", json={"title": "page"}).json()["conversation_id"]
            page = b"<!doctype html><title>t</title><p>hello page</p>"
            files = {"file": ("index.html", page, "text/html")}
            assert c.post(f"/api/conversations/{cid}/files", files=files).status_code == 201
            [entry] = c.get(f"/api/conversations/{cid}/files").json()
            assert c.get("/api/no-such-route").status_code == 404  # an access line (a 4xx)
        shown = httpx.get(entry["preview_url"], timeout=30)
        assert shown.status_code == 200 and b"hello page" in shown.content
        token = entry["preview_url"].split("/p/")[1].split("/")[0]
        wait_for(lambda: "/api/no-such-route" in server.log.read_text(), what="access line")
    finally:
        server.stop()
    log = server.log.read_text()
    assert "Application startup complete" in log  # uvicorn's own lines are not silenced
    assert token not in log, log[-3000:]
