"""Metrics and traces: what they cost, side by side in one run.

  uv run python bench/bench_observe.py [--runs N] [--stored N] [--postgres URL]

1. server CPU per streamed agent run (plan, a task that writes a file, each model reply
   streamed in 400 chunks) through three real `planact serve`: both off (METRICS=0, no
   OTLP endpoint), metrics on, metrics and traces on (spans exported over OTLP/HTTP to a
   receiver in this process); rounds interleaved, the median of each; and the server's CPU
   for one /metrics scrape (Prometheus scrapes every 15 s by default);
2. GET /metrics with N runs stored (default 1,000; some running, some waiting): the time of
   one scrape over HTTP (median of 50), SQLite, and PostgreSQL with --postgres (a database
   it may wipe).
Processes are stopped by PID at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from bench.bench_stream import Fake, Proc, one_run, planact, print_table  # noqa: E402
from tests.observe.otlp import OtlpReceiver  # noqa: E402

GOAL = {"goal": "write the file", "mode": "agent"}
SHAPE = {"chunks": 400}


def cpu_per_run(proc: Proc, url: str, runs: int) -> float:
    """Milliseconds of the server's CPU per run (after one warm-up run)."""
    start = proc.cpu()
    for _ in range(runs):
        status = one_run(url, GOAL, "/api/agent/run")
        assert status == "completed", status
    return (proc.cpu() - start) / runs * 1000


def cpu_per_scrape(proc: Proc, url: str, scrapes: int = 50) -> float:
    """Milliseconds of the server's CPU per GET /metrics."""
    with httpx.Client(base_url=url, timeout=30) as client:
        client.get("/metrics")
        start = proc.cpu()
        for _ in range(scrapes):
            assert client.get("/metrics").status_code == 200
    return (proc.cpu() - start) / scrapes * 1000


def overhead(tmp: Path, fake: Fake, procs: list[Proc], runs: int, rounds: int) -> None:
    fake.auto(SHAPE)
    with OtlpReceiver() as receiver:
        servers: dict[str, tuple[Proc, str]] = {}
        for name, env in (
            ("off", {"METRICS": "0"}),
            ("metrics", {}),
            (
                "traces",
                # the SDK's default batching (a batch every 5 s)
                {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint},
            ),
        ):
            proc, url = planact(tmp, fake, f"cpu-{name}", **env)
            procs.append(proc)
            servers[name] = (proc, url)
            assert one_run(url, GOAL, "/api/agent/run") == "completed"  # warm-up
        figures: dict[str, list[float]] = {name: [] for name in servers}
        for _ in range(rounds):
            for name, (proc, url) in servers.items():
                figures[name].append(cpu_per_run(proc, url, runs))
        scrape = cpu_per_scrape(*servers["traces"])
        time.sleep(6)  # the last batch of spans (5 s)
        spans = len(receiver.all())
    base = statistics.median(figures["off"])
    rows: list[tuple[str, ...]] = [("server", "CPU per run (median of rounds)", "ratio")]
    labels = {
        "off": "metrics and traces off (METRICS=0)",
        "metrics": "metrics on (/metrics not scraped)",
        "traces": "metrics and traces on (OTLP export)",
    }
    for name, label in labels.items():
        value = statistics.median(figures[name])
        rows.append((label, f"{value:.1f} ms", f"{value / base:.3f}x"))
    rows.append(("one /metrics scrape (server CPU)", f"{scrape:.1f} ms", ""))
    print_table(
        f"1. server CPU per streamed agent run, {rounds} interleaved rounds of {runs} runs "
        f"({spans} spans received)",
        rows,
    )
    for name in servers:
        print(f"   {name}: rounds {', '.join(f'{v:.1f}' for v in figures[name])} ms")


async def fill(database_url: str, runs: int) -> None:
    """``runs`` runs: most ended, a tenth running, a twentieth waiting (no owner: queued
    or parked, so that no server takes them over as a dead owner's)."""
    from backend.messages.message import Message
    from backend.store.parked import wait_values
    from backend.store.repo import Store

    store = Store(database_url)
    store.migrate()
    try:
        for i in range(runs):
            cid = await store.create_conversation("1", f"c{i}")
            rid = await store.start_run("1", cid, "goal", "agent", "local", None)
            if i % 20 == 0:
                asked = Message.build("approval", "may I?", status="running")
                asked.conversation_id, asked.run_id = cid, rid
                await store.append_message(asked, None, wait_values(asked.uuid, "approval", 600))
            elif i % 10 != 1:
                await store.end_run(rid, "completed" if i % 7 else "failed")
    finally:
        await store.close()


def scrape_time(tmp: Path, fake: Fake, procs: list[Proc], name: str, url: str, n: int) -> str:
    server, base = planact(tmp, fake, name, DATABASE_URL=url)
    procs.append(server)
    times = []
    with httpx.Client(base_url=base, timeout=30) as client:
        for _ in range(5):
            client.get("/metrics")
        for _ in range(50):
            t0 = time.perf_counter()
            got = client.get("/metrics")
            times.append((time.perf_counter() - t0) * 1000)
            assert got.status_code == 200
    active = [line for line in got.text.splitlines() if line.startswith("planact_runs_")]
    server.stop()
    print(f"   {name}: {'; '.join(a for a in active if not a.startswith('planact_runs_total'))}")
    p95 = statistics.quantiles(times, n=20)[-1]
    return f"median {statistics.median(times):.1f} ms, p95 {p95:.1f} ms"


def scrapes(tmp: Path, fake: Fake, procs: list[Proc], stored: int, postgres: str | None) -> None:
    rows: list[tuple[str, ...]] = [("database", f"GET /metrics with {stored} runs stored")]
    sqlite_url = f"sqlite:///{tmp}/scrape.db"
    asyncio.run(fill(sqlite_url, stored))
    rows.append(("SQLite", scrape_time(tmp, fake, procs, "scrape-sqlite", sqlite_url, stored)))
    if postgres:
        from tests.pg import wipe

        wipe(postgres)
        asyncio.run(fill(postgres, stored))
        rows.append(("PostgreSQL", scrape_time(tmp, fake, procs, "scrape-pg", postgres, stored)))
    print_table("2. one /metrics scrape over loopback HTTP (median of 50)", rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10, help="runs a round (10)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (5)")
    parser.add_argument("--stored", type=int, default=1000, help="runs stored for the scrape")
    parser.add_argument("--postgres", help="a PostgreSQL URL it may wipe (scrape figures)")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="planact-bench-observe-"))
    procs: list[Proc] = []
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the start")
    try:
        fake = Fake(tmp)
        procs.append(fake.proc)
        overhead(tmp, fake, procs, args.runs, args.rounds)
        scrapes(tmp, fake, procs, args.stored, args.postgres)
    finally:
        for proc in reversed(procs):
            proc.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
