"""`planact run` prints a preview's URL and keeps its service until the person presses
Ctrl-C; then no process of it is left."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import threading
from pathlib import Path

import httpx
import pytest

from tests.e2e.server import PLANACT, Server, server_env, wait_for
from tests.fakellm import FakeModelServer
from tests.support.ports import free_port
from tests.support.previews import app_script, done, preview_tag, processes_with, write_app
from tests.support.runtime import require_bwrap

pytestmark = [pytest.mark.e2e, pytest.mark.bwrap]


class RunWithPreview:
    """`planact run` of a goal whose model previews the sample app, its output collected."""

    def __init__(self, tmp_path: Path, env: dict[str, str]) -> None:
        self.lines: list[str] = []
        self.proc = subprocess.Popen(
            [PLANACT, "run", "Build an app and show it"],
            cwd=tmp_path,
            env={**os.environ, **env},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    def preview_url(self) -> str:
        """The URL it prints once the run is over and the preview keeps running."""
        wait_for(lambda: any("Ctrl-C" in ln for ln in self.lines), 120, "the preview line")
        [line] = [ln for ln in self.lines if ln.startswith("preview app-8080: ")]
        return line.split(": ", 1)[1].strip()

    def ctrl_c(self) -> None:
        os.killpg(self.proc.pid, signal.SIGINT)
        assert self.proc.wait(60) == 0, "".join(self.lines)

    def close(self) -> str:
        """Killed if still running; everything it printed."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        self.reader.join(10)
        assert self.proc.stdout is not None
        self.proc.stdout.close()
        return "".join(self.lines)


def test_planact_run_keeps_the_preview_until_ctrl_c(
    tmp_path: Path, fake_model: FakeModelServer
) -> None:
    require_bwrap()
    marker = f"pv{secrets.token_hex(6)}"
    app_script(fake_model, write_app() + preview_tag(8080, f"python3 app.py 8080 {marker}"), done())
    port = free_port()
    env = {
        **server_env(tmp_path, fake_model.base_url),
        "LOCAL_SANDBOX": "bwrap",
        "PREVIEW_URL": f"http://127.0.0.1:{port}",
        "PREVIEW_SOCKET_DIR": str(tmp_path / "pv"),
    }
    cli = RunWithPreview(tmp_path, env)
    try:
        url = cli.preview_url()
        assert url.startswith(f"http://127.0.0.1:{port}/p/")
        assert httpx.get(url + "api/hello", timeout=10).json()["hello"] == "preview"
        assert cli.proc.poll() is None  # still running: the run is over, the preview is not
        cli.ctrl_c()
    finally:
        cli.close()
    assert processes_with(marker) == []
    assert any("Previews keep running" in ln for ln in cli.lines)
    # it says when they stopped, and why
    assert "preview app-8080 stopped: planact run was ended.\n" in cli.lines, cli.lines[-5:]


def test_planact_run_beside_a_server_on_the_same_store_uses_its_preview_listener(
    tmp_path: Path, fake_model: FakeModelServer
) -> None:
    """`planact run` beside `planact serve` (`make run`): the server's listener holds the
    port and serves the same store's previews, so the run says nothing of a taken port and
    its URL works."""
    require_bwrap()
    port = free_port()
    shared = {
        **server_env(tmp_path, fake_model.base_url),
        "LOCAL_SANDBOX": "bwrap",
        "PREVIEW_URL": f"http://127.0.0.1:{port}",
        "PREVIEW_SOCKET_DIR": str(tmp_path / "pv"),
    }
    server = Server(tmp_path, shared).start()
    marker = f"pv{secrets.token_hex(6)}"
    app_script(fake_model, write_app() + preview_tag(8080, f"python3 app.py 8080 {marker}"), done())
    cli = RunWithPreview(tmp_path, shared)
    try:
        url = cli.preview_url()
        assert httpx.get(url + "api/hello", timeout=10).json()["hello"] == "preview"
        cli.ctrl_c()
    finally:
        text = cli.close()
        server.stop()
    assert "could not listen" not in text and "Address already in use" not in text, text
