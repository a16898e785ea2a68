"""MCP_SERVERS_FILE is validated at start, every mistake named with its server."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from backend.config import Settings
from backend.tools.mcp import McpConfigError, load_servers, parse_servers
from backend.tools.mcp.config import FILE_MAX, HttpServer, StdioServer
from tests.e2e.server import PLANACT, PROCESS_DEADLINE, server_env


def test_reads_stdio_and_http_servers(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "files": {"command": "npx", "args": ["-y", "srv"], "env": {"K": "v"}},
                    "remote": {"url": "https://example.org/mcp", "headers": {"X-Key": "k"}},
                }
            }
        )
    )
    servers = load_servers(path)
    assert servers == {
        "files": StdioServer("files", "npx", ["-y", "srv"], {"K": "v"}),
        "remote": HttpServer("remote", "https://example.org/mcp", {"X-Key": "k"}),
    }


def test_no_file_configured_means_no_servers() -> None:
    assert load_servers(None) == {}
    assert load_servers("") == {}


def test_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(McpConfigError, match=r"mcp\.json: cannot read it"):
        load_servers(tmp_path / "mcp.json")


def test_bad_json_says_where(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text('{"mcpServers": {"a": {"command": "x",}}}')
    with pytest.raises(McpConfigError, match=r"not valid JSON \(line 1, column"):
        load_servers(path)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "expected an object"),
        ({"servers": {}}, "expected an object"),
        ({"mcpServers": {"both": {"command": "x", "url": "http://h/mcp"}}}, "'both'.*both"),
        ({"mcpServers": {"neither": {"args": []}}}, "'neither': needs 'command'"),
        ({"mcpServers": {"odd": "npx srv"}}, "'odd': expected an object"),
        ({"mcpServers": {"a__b": {"command": "x"}}}, "'a__b': a name is"),
        ({"mcpServers": {"s": {"command": ""}}}, "'s': 'command' must be"),
        ({"mcpServers": {"s": {"command": "x", "args": "-y"}}}, "'s': 'args' must be"),
        ({"mcpServers": {"s": {"command": "x", "env": {"K": 1}}}}, "'s': 'env' must be"),
        ({"mcpServers": {"s": {"command": "x", "headers": {}}}}, "'s': unknown key.*headers"),
        ({"mcpServers": {"s": {"url": "ftp://h/x"}}}, "'s': 'url' must be"),
        ({"mcpServers": {"s": {"url": "http://h/", "type": "sse"}}}, "'s': 'type' 'sse'"),
        ({"mcpServers": {"s": {"url": "http://h/", "headers": ["a"]}}}, "'headers' must be"),
    ],
)
def test_unusable_shapes_are_named(data: object, message: str) -> None:
    with pytest.raises(McpConfigError, match=message):
        parse_servers(data)


def test_type_that_agrees_is_accepted() -> None:
    servers = parse_servers(
        {
            "mcpServers": {
                "a": {"type": "stdio", "command": "x"},
                "b": {"type": "streamable-http", "url": "http://127.0.0.1:1/mcp"},
            }
        }
    )
    assert isinstance(servers["a"], StdioServer)
    assert isinstance(servers["b"], HttpServer)


def test_a_device_is_refused_without_reading_it() -> None:
    with pytest.raises(McpConfigError, match=r"^MCP_SERVERS_FILE /dev/zero: not a regular file"):
        load_servers("/dev/zero")  # read without a bound, it never ends


def test_a_file_too_large_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text('{"mcpServers": {}}' + " " * FILE_MAX)
    with pytest.raises(McpConfigError, match=r"mcp\.json: larger than 1 MiB"):
        load_servers(path)


def test_nesting_thousands_deep_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text('{"mcpServers": ' + "[" * 5000 + "]" * 5000 + "}")
    with pytest.raises(McpConfigError, match=r"mcp\.json: nested too deeply"):
        load_servers(path)


def test_text_that_is_not_utf8_is_named(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_bytes(b'{"mcpServers": {"\xff": {}}}')
    with pytest.raises(McpConfigError, match=r"mcp\.json: not UTF-8 text \(byte 17\)"):
        load_servers(path)


def test_an_empty_setting_means_no_servers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_SERVERS_FILE", "")  # as .env files write an unset value
    assert Settings().mcp_servers_file is None
    monkeypatch.setenv("MCP_SERVERS_FILE", "  ")
    assert Settings().mcp_servers_file is None


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ("/dev/zero", "MCP_SERVERS_FILE /dev/zero: not a regular file; point it at a JSON file."),
        ("deep", "nested too deeply to be a list of servers."),
    ],
)
def test_serve_with_an_unusable_file_says_why_in_one_line_and_exits_2(
    tmp_path: Path, content: str, said: str
) -> None:
    if content == "deep":
        path = tmp_path / "deep.json"
        path.write_text("[" * 5000 + "]" * 5000)
        content = str(path)
    env = {**os.environ, **server_env(tmp_path, "http://127.0.0.1:9"), "MCP_SERVERS_FILE": content}
    proc = subprocess.run(
        [PLANACT, "serve", "--port", "0"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=PROCESS_DEADLINE,  # /dev/zero used to hang here
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("planact: MCP_SERVERS_FILE ") and line.endswith(said)
