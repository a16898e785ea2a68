"""Resume delay after kill -9 of a run's owner: two `planact serve` (EXECUTOR=inline) on one
database; the owner is killed while the run's model call is in flight; the delay is from the
kill to the model call made again by the other server (the run going on), and beyond the
dead owner's lease expiry (its `instances.expires_at` in the store, read after the kill).

    uv run python bench/bench_resume.py [--runs N] [--lease SECONDS] [--hosts same,other]

DATABASE: TEST_POSTGRES_URL when set (the database is wiped!), else a SQLite file.
Goal: lease expiry + <= 2 s. Two cases, alternating kill by kill:
- same host: the survivor sees the dead owner's PID gone at its next recovery round (every
  third of the lease), so the run usually goes on before the lease expires (negative
  "beyond expiry");
- other host: the owner runs in a PID namespace of its own (bubblewrap --unshare-pid), so
  the survivor cannot check its PID, as with a replica on another machine: only the lease
  expiry tells, and the figure is the delay beyond it.
The baseline printed beside it, measured in the same run, is a fresh run's time from its
POST to its first model call on the same servers. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import create_engine, text

import tests.e2e.server as server_module
from tests.agent.scripts import finish, plan_reply
from tests.e2e.cluster import follow, start_json
from tests.e2e.server import PLANACT, Server, server_env
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


class OtherHostServer(Server):
    """`planact serve` in a PID namespace of its own: to the other processes it is on
    another host (its host identity differs, its PID means nothing to them)."""

    def start(self, timeout: float = 30) -> Server:
        real = PLANACT
        wrapper = self.workdir / f"other-host-{self.port}"
        wrapper.write_text(
            f'#!/bin/sh\nexec bwrap --unshare-pid --dev-bind / / --die-with-parent "{real}" "$@"\n'
        )
        wrapper.chmod(0o755)
        server_module.PLANACT = str(wrapper)  # Server.start reads it at call time
        try:
            return super().start(timeout)
        finally:
            server_module.PLANACT = real


def lease_expiry(db_url: str, run_id: str) -> float:
    """The epoch second the run's (dead) owner's lease ends, as the store says."""
    engine = create_engine(db_url)
    try:
        with engine.connect() as c:
            row = c.execute(
                text(
                    "SELECT i.expires_at FROM runs r JOIN instances i ON i.id = r.owner"
                    " WHERE r.id = :rid"
                ),
                {"rid": run_id},
            ).one()
    finally:
        engine.dispose()
    value = row[0]
    if isinstance(value, str):  # SQLite hands back text
        value = datetime.fromisoformat(value)
    return float(value.replace(tzinfo=UTC).timestamp())


def one(
    tmp: Path, fake: FakeModelServer, lease: float, url: str, other_host: bool
) -> tuple[float, float, float]:
    """(resume delay after the kill, after the lease expiry, baseline) in seconds."""
    if url.startswith("postgresql"):
        wipe(url)
        extra = {"DATABASE_URL": url}
    else:
        extra = {}
    env = server_env(tmp, fake.base_url, EXECUTOR="inline", LEASE_SECONDS=str(lease), **extra)
    db_url = env["DATABASE_URL"]
    owner = OtherHostServer(tmp, env) if other_host else Server(tmp, env)
    a, b = owner.start(60), Server(tmp, env).start(60)
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
        expiry = lease_expiry(db_url, ids["run_id"])
        again = wait_calls(fake, "thinking", 2)
        _, end = follow(b, ids["run_id"])
        if end is None or end["status"] != "completed":
            raise SystemExit(f"the run did not complete: {end}")
        return again - killed, again - expiry, first - posted
    finally:
        fake.release("in-flight")
        a.stop()
        b.stop()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5, help="kills per case")
    parser.add_argument("--lease", type=float, default=12.0, help="LEASE_SECONDS (default 12)")
    parser.add_argument("--hosts", default="same,other", help="comma-separated cases: same, other")
    args = parser.parse_args()
    url = os.environ.get("TEST_POSTGRES_URL", "")
    cases = [h.strip() for h in args.hosts.split(",")]
    fake = FakeModelServer().start()
    got: dict[str, list[tuple[float, float, float]]] = {case: [] for case in cases}
    try:
        for i in range(args.runs):
            for case in cases:  # alternating: the machine's load falls on both
                with tempfile.TemporaryDirectory(prefix="bench-resume-") as tmp:
                    delay, beyond, base = one(Path(tmp), fake, args.lease, url, case == "other")
                got[case].append((delay, beyond, base))
                print(
                    f"{case} host, kill {i + 1}: went on {delay:5.2f} s after kill -9, "
                    f"{beyond:+5.2f} s after the lease expiry (baseline {base:4.2f} s)",
                    flush=True,
                )
    finally:
        fake.stop()
    print(f"database: {'PostgreSQL' if url else 'SQLite'}; LEASE_SECONDS={args.lease:g}")
    for case, rows in got.items():
        delays, beyonds, bases = ([r[k] for r in rows] for k in range(3))
        median_base = statistics.median(bases)
        print(
            f"{case} host: after the kill median {statistics.median(delays):.2f} s "
            f"(range {min(delays):.2f}-{max(delays):.2f}); beyond the lease expiry median "
            f"{statistics.median(beyonds):+.2f} s (range {min(beyonds):+.2f} to "
            f"{max(beyonds):+.2f}); goal <= +2 s: {sum(b <= 2.0 for b in beyonds)}/"
            f"{len(beyonds)}; baseline (POST to first model call of a fresh run) median "
            f"{median_base:.2f} s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
