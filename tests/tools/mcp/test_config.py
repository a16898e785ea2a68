"""MCP_SERVERS_FILE is validated at start, every mistake named with its server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from backend.tools.mcp import McpConfigError, load_servers, parse_servers
from backend.tools.mcp.config import HttpServer, StdioServer


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
