"""Several planact processes on one database: servers (tests/e2e/server.py) and workers."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx

from tests.e2e.server import PLANACT, Process, Server
from tests.sse_client import collect


class Worker(Process):
    """`planact worker` in a subprocess; ready when it prints its ready line."""

    stop_wait = 20.0  # a worker drains its runs on SIGTERM

    def __init__(self, workdir: Path, env: dict[str, str], name: str) -> None:
        self.workdir = workdir
        self.env = env
        self.name = name
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = workdir / f"worker-{name}.log"

    def start(self, timeout: float = 60) -> Worker:
        env = {**os.environ, **self.env}
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [PLANACT, "worker"],
                cwd=self.workdir,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"worker exited: {self.log.read_text()[-3000:]}")
            if b" ready" in self.log.read_bytes():
                return self
            time.sleep(0.05)
        raise RuntimeError(f"worker not ready in {timeout}s: {self.log.read_text()[-3000:]}")


def start_json(server: Server, body: dict[str, Any]) -> httpx.Response:
    with server.client() as c:
        return c.post("/api/agent/run", json=body, headers={"Accept": "application/json"})


def follow(server: Server, run_id: str, after: int = 0) -> tuple[list[dict[str, Any]], Any]:
    with (
        server.client() as c,
        c.stream("GET", f"/api/agent/runs/{run_id}/events?after={after}") as r,
    ):
        assert r.status_code == 200, r.read()
        return collect(r.iter_lines())


def messages(server: Server, cid: str) -> list[dict[str, Any]]:
    with server.client() as c:
        got: list[dict[str, Any]] = c.get(f"/api/conversations/{cid}/messages").json()
        return got


def run_status(server: Server, cid: str) -> list[str]:
    with server.client() as c:
        return [r["status"] for r in c.get(f"/api/conversations/{cid}").json()["runs"]]


def open_running(msgs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`running` messages without their final partner (tasks pair by task id)."""
    closed_uuids = {m["uuid"] for m in msgs if m["status"] != "running"}
    closed_tasks = {
        m["meta"]["task_id"]
        for m in msgs
        if m["meta"]["action_type"] == "task" and m["status"] != "running"
    }
    out = []
    for m in msgs:
        if m["status"] != "running":
            continue
        if m["meta"]["action_type"] == "task":
            if m["meta"]["task_id"] not in closed_tasks:
                out.append(m)
        elif m["uuid"] not in closed_uuids:
            out.append(m)
    return out
