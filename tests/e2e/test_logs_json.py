"""LOG_FORMAT=json: `planact serve` writes one JSON object a line, its run lines naming the
run, conversation and user, and uvicorn's lines (access and error) included."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.server import Server, server_env, wait_for
from tests.fakellm import FakeModelServer

pytestmark = pytest.mark.e2e

TOKEN = "json-log-token"


def test_json_logs_parse_line_by_line_and_name_the_run_and_the_user(
    tmp_path: Path, fake_model: FakeModelServer
) -> None:
    env = server_env(
        tmp_path,
        fake_model.base_url,
        LOG_FORMAT="json",
        LOG_LEVEL="INFO",
        AUTH_TOKEN=TOKEN,
        AUTH_TOKENS="alice:alice-token",
    )
    server = Server(tmp_path, env).start()
    try:
        fake_model.script({"stage": "auto_reply", "content": "Hello."})
        headers = {"Authorization": "Bearer alice-token"}
        _, end, answer = server.run({"goal": "say hello", "mode": "chat"}, headers=headers)
        assert end["status"] == "completed"
        rid, cid = answer["x-run-id"], answer["x-conversation-id"]
        with server.client() as c:  # a refused request: an access line without a user
            assert c.post("/api/agent/run", json={"goal": "x"}).status_code == 401
        wait_for(lambda: f"run {rid} ended" in server.log.read_text(), what="the end line")
    finally:
        server.stop()
    text = server.log.read_text()
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]  # every line
    assert all(
        isinstance(r, dict) and {"time", "level", "logger", "message"} <= set(r) for r in lines
    )
    runs = [r for r in lines if r["logger"] == "planact.runs"]
    assert [r["message"].split(":")[0] for r in runs] == [f"run {rid} started", f"run {rid} ended"]
    for record in runs:
        assert (record["run_id"], record["conversation_id"], record["user"]) == (rid, cid, "alice")
    access = [r for r in lines if r["logger"] == "uvicorn.access"]
    started = _one(access, "POST", 200)
    assert (started["run_id"], started["conversation_id"], started["user"]) == (rid, cid, "alice")
    assert started["path"] == "/api/agent/run"
    refused = _one(access, "POST", 401)
    assert "user" not in refused and "run_id" not in refused
    errors = [r for r in lines if r["logger"] == "uvicorn.error"]
    assert any("Application startup complete" in r["message"] for r in errors)
    assert "trace_id" not in started  # no tracing configured: no span records


def _one(access: list[dict[str, Any]], method: str, status: int) -> dict[str, Any]:
    found = [r for r in access if r.get("method") == method and r.get("status") == status]
    assert len(found) == 1, access
    return found[0]


def test_text_stays_the_default(tmp_path: Path, fake_model: FakeModelServer) -> None:
    env = server_env(tmp_path, fake_model.base_url, LOG_LEVEL="INFO")
    server = Server(tmp_path, env).start()
    try:
        fake_model.script({"stage": "auto_reply", "content": "Hello."})
        _, end, answer = server.run({"goal": "say hello", "mode": "chat"})
        assert end["status"] == "completed"
        rid = answer["x-run-id"]
        wait_for(lambda: f"run {rid} ended" in server.log.read_text(), what="the end line")
    finally:
        server.stop()
    ours = [line for line in server.log.read_text().splitlines() if f"run {rid} ended" in line]
    assert len(ours) == 1 and not ours[0].startswith("{")
    assert " INFO planact.runs: " in ours[0]
