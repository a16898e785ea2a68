"""GET /api/mcp/servers: each server's state, tools, error and stderr, behind the token;
the app stops every server it started when it shuts down."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from backend.app import create_app
from backend.tools.mcp import McpConfigError
from tests.procs import alive
from tests.support.mcp import HttpServerProcess, stdio
from tests.support.settings import make_settings


def servers_file(tmp_path: Path, servers: dict[str, object]) -> Path:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def test_lists_each_server_with_state_tools_and_stderr(tmp_path: Path) -> None:
    path = servers_file(
        tmp_path, {"calc": stdio("tools_server.py"), "broken": stdio("exits_at_start.py")}
    )
    settings = make_settings(tmp_path, mcp_servers_file=path, auth_token="secret")
    with TestClient(create_app(settings)) as client:
        assert client.get("/api/mcp/servers").status_code == 401
        response = client.get("/api/mcp/servers", headers={"Authorization": "Bearer secret"})
        assert response.status_code == 200
        calc, broken = response.json()
        assert calc["name"] == "calc" and calc["state"] == "ready"
        assert {"name": "add", "description": "Add two numbers."} in calc["tools"]
        assert "error" not in calc
        (up,) = [line for line in calc["stderr"] if line.startswith("tools server up")]
        pid = int(re.findall(r"pid (\d+)", up)[0])
        assert alive(pid)
        assert broken["name"] == "broken" and broken["state"] == "failed"
        assert broken["tools"] == [] and "closed the connection" in broken["error"]
        assert broken["stderr"][-1] == "fatal: TOKEN is not set"
    assert not alive(pid)  # stopped with the app


def test_no_servers_configured_is_an_empty_list(tmp_path: Path) -> None:
    with TestClient(create_app(make_settings(tmp_path))) as client:
        response = client.get("/api/mcp/servers")
        assert (response.status_code, response.json()) == (200, [])


def test_a_bad_servers_file_stops_start_up_with_its_reason(tmp_path: Path) -> None:
    path = servers_file(tmp_path, {"x": {"command": "a", "url": "http://h/mcp"}})
    with pytest.raises(McpConfigError, match="server 'x': has both 'command'"):
        create_app(make_settings(tmp_path, mcp_servers_file=path))


def test_a_streamable_http_server_goes_failed_when_down_and_ready_when_back(
    tmp_path: Path,
) -> None:
    server = HttpServerProcess()
    server.start()
    path = servers_file(tmp_path, {"web": {"url": server.url}})
    settings = make_settings(tmp_path, mcp_servers_file=path, mcp_restart_backoff=0)
    try:
        with TestClient(create_app(settings)) as client:
            (web,) = client.get("/api/mcp/servers").json()
            assert web["state"] == "ready" and web["tools"]
            server.kill()
            (web,) = client.get("/api/mcp/servers").json()  # it asks: the server is gone
            assert web["state"] == "failed" and web["tools"] == []
            assert web["error"].startswith(f"{server.url}: ConnectError")
            server.start()
            (web,) = client.get("/api/mcp/servers").json()  # back, without a restart
            assert web["state"] == "ready" and "error" not in web
            server.kill()
            server.start()  # restarted while ready: its old session is gone
            (web,) = client.get("/api/mcp/servers").json()
            assert web["state"] == "ready"
    finally:
        server.kill()
