"""A real Prometheus (Debian's package, scripts/ci.d/35-prometheus.sh) scrapes a real
`planact serve` and a real `planact worker` (EXECUTOR=queue on PostgreSQL), with the bearer
token of METRICS_TOKEN; after a run its query API returns the run's counts."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.agent.scripts import finish, plan_reply, run
from tests.e2e.cluster import Worker, follow, start_json
from tests.e2e.server import PROCESS_DEADLINE, Server, server_env, wait_for
from tests.fakellm import FakeModelServer
from tests.pg import postgres_url, wipe
from tests.support.ports import free_port

pytestmark = pytest.mark.e2e
TOKEN = "metrics-token-for-the-test"


def require_prometheus() -> str:
    found = shutil.which("prometheus")
    if found is None:
        if os.environ.get("REQUIRE_PROMETHEUS") == "1":
            pytest.fail("REQUIRE_PROMETHEUS=1 but prometheus is not installed")
        pytest.skip("prometheus not installed (scripts/ci.d/35-prometheus.sh installs it)")
    return found


class Prometheus:
    def __init__(self, binary: str, workdir: Path, targets: dict[str, str]) -> None:
        self.port = free_port()
        self.workdir = workdir
        jobs = "".join(
            f"""
  - job_name: {job}
    authorization:
      credentials: {TOKEN}
    static_configs:
      - targets: ["{target}"]
"""
            for job, target in targets.items()
        )
        config = workdir / "prometheus.yml"
        config.write_text(
            f"global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:{jobs}"
        )
        self.log = workdir / "prometheus.log"
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [
                    binary,
                    f"--config.file={config}",
                    f"--storage.tsdb.path={workdir / 'tsdb'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def ready(self) -> bool:
        if self.proc.poll() is not None:
            raise RuntimeError(f"prometheus exited: {self.log.read_text()[-3000:]}")
        try:
            return httpx.get(f"http://127.0.0.1:{self.port}/-/ready", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    def query(self, promql: str) -> list[dict[str, Any]]:
        got = httpx.get(
            f"http://127.0.0.1:{self.port}/api/v1/query", params={"query": promql}, timeout=10
        )
        got.raise_for_status()
        body = got.json()
        assert body["status"] == "success", body
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def targets(self) -> list[dict[str, Any]]:
        """The scrape targets with their health and last error (a failure's message)."""
        got = httpx.get(f"http://127.0.0.1:{self.port}/api/v1/targets", timeout=10).json()
        return [
            {k: t.get(k) for k in ("scrapeUrl", "health", "lastError")}
            for t in got["data"]["activeTargets"]
        ]

    def scalar(self, promql: str) -> float | None:
        result = self.query(promql)
        return float(result[0]["value"][1]) if result else None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)


@pytest.fixture
def cluster(tmp_path: Path, fake_model: FakeModelServer) -> Iterator[tuple[Server, Worker, int]]:
    url = postgres_url()
    wipe(url)
    env = server_env(
        tmp_path, fake_model.base_url, DATABASE_URL=url, EXECUTOR="queue", METRICS_TOKEN=TOKEN
    )
    worker_port = free_port()
    server = Server(tmp_path, env).start()
    worker = Worker(tmp_path, {**env, "METRICS_PORT": str(worker_port)}, "w1")
    try:
        worker.start()
        yield server, worker, worker_port
    finally:
        worker.stop()
        server.stop()


def test_prometheus_scrapes_a_server_and_a_worker_and_counts_the_run(
    tmp_path: Path, cluster: tuple[Server, Worker, int], fake_model: FakeModelServer
) -> None:
    binary = require_prometheus()
    server, _worker, worker_port = cluster
    worker_target = f"127.0.0.1:{worker_port}"
    # the worker's own listener is protected as the server's endpoint is
    assert httpx.get(f"http://{worker_target}/metrics", timeout=10).status_code == 401
    folder = tmp_path / "prometheus"
    folder.mkdir()
    prometheus = Prometheus(
        binary, folder, {"planact-api": f"127.0.0.1:{server.port}", "planact-worker": worker_target}
    )

    def both_up() -> bool:
        return prometheus.scalar("sum(up)") == 2

    try:
        wait_for(prometheus.ready, timeout=PROCESS_DEADLINE, what="prometheus to be ready")
        try:
            wait_for(both_up, timeout=PROCESS_DEADLINE, what="targets up")
        except AssertionError:
            raise AssertionError(prometheus.targets()) from None
        fake_model.script(
            {"stage": "planning", "content": plan_reply("Count")},
            {"stage": "thinking", "content": run("echo counted")},
            {"stage": "thinking", "content": finish("counted")},
        )
        ids = start_json(server, {"goal": "count", "mode": "agent"}).json()
        _, end = follow(server, ids["run_id"])
        assert end is not None and end["status"] == "completed"

        completed = 'sum(planact_runs_total{status="completed"})'
        wait_for(lambda: prometheus.scalar(completed) == 1, what="the run counted by Prometheus")
        # executed by the worker: its target has the run and its model calls
        by_job = {
            r["metric"]["job"]: float(r["value"][1])
            for r in prometheus.query(f"sum by (job) ({completed[4:-1]})")
        }
        assert by_job == {"planact-api": 0.0, "planact-worker": 1.0}
        calls = 'sum(planact_model_calls_total{job="planact-worker",outcome="ok"})'
        assert prometheus.scalar(calls) == 3
        actions = 'sum(planact_actions_total{type="terminal_run",status="success"})'
        assert prometheus.scalar(actions) == 1
        # the store's families: the same on every target, nothing running or queued now
        wait_for(
            lambda: (
                prometheus.scalar("max(planact_runs_active)") == 0
                and prometheus.scalar("max(planact_queued_jobs)") == 0
            ),
            what="no run active or queued",
        )
    finally:
        prometheus.stop()
