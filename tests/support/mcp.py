"""MCP servers for tests: the SDK-written servers of tests/tools/mcp/servers, over stdio or HTTP."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from backend.tools.mcp import McpManager
from tests.procs import alive
from tests.support.ports import free_port

SERVERS = Path(__file__).parents[1] / "tools" / "mcp" / "servers"


def stdio(script: str, *args: str, **extra: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(SERVERS / script), *args], **extra}


def wait_until(check: Callable[[], bool], what: str, deadline: float = 30.0) -> None:
    """Wait for a condition (a process gone, a port open, a state) within a generous bound."""
    end = time.monotonic() + deadline
    while not check():
        if time.monotonic() > end:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.01)


async def await_until(check: Callable[[], bool], what: str, deadline: float = 30.0) -> None:
    import anyio

    end = time.monotonic() + deadline
    while not check():
        if time.monotonic() > end:
            raise AssertionError(f"gave up waiting for {what}")
        await anyio.sleep(0.01)


class HttpServerProcess:
    """tools_server.py over streamable HTTP on 127.0.0.1, a real process."""

    def __init__(self, mode: str = "http") -> None:
        self.port = free_port()
        # "http"; "http400": an unknown session is answered with 400 (a JSON-RPC error saying
        # so); "http400text": with a plain-text 400 that does not say why
        self.mode = mode
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(SERVERS / "tools_server.py"), self.mode, str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        proc = self.proc
        wait_until(lambda: self._accepts() or proc.poll() is not None, "the HTTP MCP server")
        assert proc.poll() is None, "the HTTP MCP server exited at start"

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def _accepts(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return True
        except OSError:
            return False


async def server_pid(manager: McpManager, server: str) -> int:
    result = await manager.call(f"{server}__pid", "{}")
    assert result.ok, result.content
    pid = int(result.content)
    assert alive(pid)
    return pid
