"""What `planact serve` and `planact run` say at start about the local runtime's sandbox
when bubblewrap is missing (a PATH without it)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.e2e.server import PLANACT, Server, server_env
from tests.fakellm import FakeModelServer

pytestmark = pytest.mark.e2e

NO_BWRAP = {"PATH": "/nonexistent"}  # bwrap is not found; nothing else needs PATH here


def planact(
    tmp: Path, fake: FakeModelServer, *args: str, **env: str
) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, **server_env(tmp, fake.base_url, **env)}
    return subprocess.run(
        [PLANACT, *args],
        cwd=tmp,
        env=full,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("command", [["serve", "--port", "1"], ["run", "hello"]])
def test_bwrap_mode_without_bubblewrap_refuses_to_start(
    tmp_path: Path, fake_model: FakeModelServer, command: list[str]
) -> None:
    done = planact(tmp_path, fake_model, *command, LOCAL_SANDBOX="bwrap", **NO_BWRAP)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "LOCAL_SANDBOX=bwrap but bubblewrap (bwrap) is not installed" in done.stderr
    assert "apt-get install bubblewrap" in done.stderr


def test_auto_without_bubblewrap_says_so_once_and_runs_unsandboxed(
    tmp_path: Path, fake_model: FakeModelServer
) -> None:
    fake_model.script({"stage": "auto_reply", "content": "Hello."})
    env = server_env(tmp_path, fake_model.base_url, **NO_BWRAP)
    server = Server(tmp_path, env).start()
    try:
        _messages, end, _ = server.run({"goal": "hello", "mode": "chat"})
        assert end is not None and end["status"] == "completed"
        assert "local" in httpx.get(f"{server.url}/api/health", timeout=10).json()["runtimes"]
    finally:
        server.stop()
    log = server.log.read_text()
    assert log.count("apt-get install bubblewrap") == 1, log
    assert "bubblewrap (bwrap) is not installed" in log
