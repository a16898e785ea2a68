"""Start the real `planact serve` in a subprocess, black-box."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from tests.migrated import place_migrated
from tests.openapi_check import ResponseCheck
from tests.sse_client import collect
from tests.support.ports import free_port

PLANACT = str(Path(sys.executable).with_name("planact"))
SQLITE = "sqlite:///"
# a safety net, never a wait: how long a planact process may take to start and answer (or
# exit) on a loaded machine; every wait on one is for its event (health, its exit)
PROCESS_DEADLINE = 240.0


class Process:
    """A planact process in its own session: stop (SIGTERM, then SIGKILL) and kill -9."""

    proc: subprocess.Popen[bytes] | None = None
    stop_wait = 15.0  # seconds SIGTERM gets before SIGKILL

    def kill9(self) -> None:
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(self.stop_wait)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)


class Server(Process):
    def __init__(
        self,
        workdir: Path,
        env: dict[str, str],
        port: int | None = None,
        preexec_fn: Callable[[], None] | None = None,
        migrated: bool = True,
    ) -> None:
        """``migrated``: a SQLite ``DATABASE_URL`` whose file is missing starts from a copy
        of the migrated database (tests/migrated.py) rather than migrating; False keeps the
        first start's migrations (a test of what they log)."""
        self.workdir = workdir
        self.env = env
        self.migrated = migrated
        self.port = port or free_port()
        self.preexec_fn = preexec_fn
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = workdir / f"server-{self.port}.log"
        self._response_check: ResponseCheck | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = PROCESS_DEADLINE) -> Server:
        env = {**os.environ, **self.env}
        database = self.env.get("DATABASE_URL", "")
        if self.migrated and database.startswith(SQLITE):
            place_migrated(Path(database.removeprefix(SQLITE)))
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [PLANACT, "serve", "--port", str(self.port)],
                cwd=self.workdir,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=self.preexec_fn,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited: {self.log.read_text()[-3000:]}")
            try:
                if httpx.get(f"{self.url}/api/health", timeout=1).status_code == 200:
                    return self
            except httpx.TransportError:
                time.sleep(0.05)
        raise RuntimeError(f"server not healthy in {timeout}s: {self.log.read_text()[-3000:]}")

    def client(self, **kwargs: Any) -> httpx.Client:
        """A client whose every answer is checked against the server's OpenAPI document
        (tests/openapi_check.py)."""
        client = httpx.Client(base_url=self.url, timeout=60, **kwargs)
        hooks = client.event_hooks
        client.event_hooks = {**hooks, "response": [*hooks.get("response", []), self._check_answer]}
        return client

    def _check_answer(self, response: httpx.Response) -> None:
        # the document is fetched at the first answer (the server is up then)
        self.response_check()(response)

    def response_check(self) -> ResponseCheck:
        if self._response_check is None:
            found = httpx.get(f"{self.url}/api/openapi.json", timeout=60)
            assert found.status_code == 200, found.text
            self._response_check = ResponseCheck(found.json())
        return self._response_check

    def run(self, body: dict[str, Any], **kwargs: Any) -> tuple[list[dict[str, Any]], Any, Any]:
        """POST a goal and read its whole stream."""
        with (
            self.client(**kwargs) as c,
            c.stream("POST", "/api/agent/run", json=body) as resp,
        ):
            assert resp.status_code == 200, resp.read()
            messages, end = collect(resp.iter_lines())
            return messages, end, resp.headers


def server_env(tmp: Path, model_url: str, **extra: str) -> dict[str, str]:
    return {
        "DATABASE_URL": f"sqlite:///{tmp}/planact.db",
        "WORKSPACE_DIR": str(tmp / "workspace"),
        "LLM_MODEL": "openai/fake-model",
        "LLM_API_KEY": "sk-fake",
        "LLM_BASE_URL": model_url,
        "LLM_RETRY_BASE_DELAY": "0.01",
        "TERMINAL_TIMEOUT": "30",
        "FRONTEND_DIST": str(tmp / "no-ui"),
        "LOG_LEVEL": "WARNING",
        **extra,
    }


@contextmanager
def running_server(tmp: Path, model_url: str, **extra: str) -> Iterator[Server]:
    server = Server(tmp, server_env(tmp, model_url, **extra)).start()
    try:
        yield server
    finally:
        server.stop()


def wait_for(predicate: Any, timeout: float = 60, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")
