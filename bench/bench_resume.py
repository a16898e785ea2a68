"""Resume delay after kill -9 of a run's owner: two `planact serve` (EXECUTOR=inline) on one
database; the owner is killed while the run's model call is in flight; the delay is from the
kill to the model call made again by the other server (the run going on).

    uv run python bench/bench_resume.py [--runs N] [--lease SECONDS]

DATABASE: TEST_POSTGRES_URL when set (the database is wiped!), else a SQLite file.
Goal: lease expiry + <= 2 s. On one host a dead owner's PID is seen gone at the next
recovery round (every third of the lease), so the delay is usually well under the lease;
the baseline printed beside it, measured in the same run, is a fresh run's time from its
POST to its first model call on the same servers. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from tests.agent.scripts import finish, plan_reply
from tests.e2e.cluster import follow, start_json
from tests.e2e.server import Server, server_env
from tests.fakellm import FakeModelServer
from tests.pg import wipe


def wait_calls(fake: FakeModelServer, stage: str, count: int, timeout: float = 120) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        calls = [c for c in fake.model.calls if c["stage"] == stage]
        if len(calls) >= count:
            return float(calls[count - 1]["time"])
        time.sleep(0.005)
    raise SystemExit(f"no {stage} call #{count} within {timeout} s")


def one(tmp: Path, fake: FakeModelServer, lease: float, url: str) -> tuple[float, float]:
    """(resume delay, baseline) in seconds for one kill -9."""
    if url.startswith("postgresql"):
        wipe(url)
        extra = {"DATABASE_URL": url}
    else:
        extra = {}
    env = server_env(tmp, fake.base_url, EXECUTOR="inline", LEASE_SECONDS=str(lease), **extra)
    a, b = Server(tmp, env).start(60), Server(tmp, env).start(60)
    fake.model.reset()
    try:
        fake.script(
            {"stage": "planning", "content": plan_reply("Wait")},
            {"stage": "thinking", "content": finish("never"), "hold": "in-flight"},
            {"stage": "thinking", "content": finish("went on")},
        )
        posted = time.time()
        ids = start_json(a, {"goal": "write code"}).json()
        first = wait_calls(fake, "thinking", 1)
        killed = time.time()
        a.kill9()
        again = wait_calls(fake, "thinking", 2)
        _, end = follow(b, ids["run_id"])
        if end is None or end["status"] != "completed":
            raise SystemExit(f"the run did not complete: {end}")
        return again - killed, first - posted
    finally:
        fake.release("in-flight")
        a.stop()
        b.stop()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--lease", type=float, default=6.0)
    args = parser.parse_args()
    url = os.environ.get("TEST_POSTGRES_URL", "")
    fake = FakeModelServer().start()
    delays: list[float] = []
    baselines: list[float] = []
    try:
        for i in range(args.runs):
            with tempfile.TemporaryDirectory(prefix="bench-resume-") as tmp:
                delay, base = one(Path(tmp), fake, args.lease, url)
            delays.append(delay)
            baselines.append(base)
            print(f"run {i + 1}: resumed {delay:5.2f} s after kill -9 (baseline {base:5.2f} s)")
    finally:
        fake.stop()
    goal = args.lease + 2.0
    med, worst = statistics.median(delays), max(delays)
    print(f"database: {'PostgreSQL' if url else 'SQLite'}; LEASE_SECONDS={args.lease:g}")
    print(f"resume delay: median {med:.2f} s, max {worst:.2f} s; goal <= {goal:.1f} s")
    print(
        f"baseline (POST to first model call of a fresh run): median "
        f"{statistics.median(baselines):.2f} s; ratio delay/baseline "
        f"{med / max(statistics.median(baselines), 1e-6):.1f}x"
    )
    print(f"within the goal: {sum(d <= goal for d in delays)}/{len(delays)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
