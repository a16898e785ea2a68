"""Real MCP servers (tests/tools/mcp/servers, written with the SDK) for the manager tests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from backend.tools.mcp import McpManager, parse_servers
from tests.support.mcp import HttpServerProcess


@pytest.fixture
def http_server() -> Iterator[HttpServerProcess]:
    server = HttpServerProcess()
    server.start()
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture
async def make_manager() -> AsyncIterator[Callable[..., McpManager]]:
    made: list[McpManager] = []

    def make(servers: dict[str, dict[str, Any]], **options: Any) -> McpManager:
        options.setdefault("call_timeout", 30.0)
        options.setdefault("start_timeout", 30.0)
        manager = McpManager(parse_servers({"mcpServers": servers}), **options)
        made.append(manager)
        return manager

    yield make
    for manager in made:
        await manager.aclose()
