"""CPU per streamed run: `planact serve` against the minimal relay (bench/relay.py) with
the same live deltas, side by side in one run.

  uv run python bench/bench_cpu.py [--levels 50,200,500] [--repeats 1] [--runs-each 1]
      [--count-runs 10] [--show-sql N] [--base REF] [--profile DIR] [--quick]

Everything runs on loopback: the fake model (tests/fakellm.py), planact (SQLite) and the
relay, each in its own process, stopped by PID at the end. Each run is a route call and a
streamed answer (two model calls, each 1 s to the first token then 400 chunks 30 ms apart);
the relay makes the same two calls and forwards the answer as the same coalesced deltas. At
each level the servers are loaded one at a time, alternating which goes first (slow drift
in the machine's load falls on both), and /api/health is probed every 50 ms meanwhile.
Prints per level: server CPU per run (its process's CPU time / completed runs), runs/s,
/api/health p99, deltas per run, and planact ÷ relay. Before the load, a separate planact
that counts its SQL (bench/counted_serve.py: SQLAlchemy events) and the relay run
COUNT_RUNS runs each: statements, rows written and transactions per run.

--base REF also runs planact at commit REF (a git worktree, the same interpreter with
PYTHONPATH on it: the commits must share their dependencies), measured alongside: the
before and after of a change in one run.

--profile DIR records a py-spy profile (raw collapsed stacks, every thread) of each server
at each level, in DIR/<server>-<level>-<repeat>.txt (py-spy is a dev dependency; it samples
from outside, adding a little CPU to the measured process). Asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from bench.bench_checkpoint import code_of, git, profiler, serve  # noqa: E402
from bench.bench_stream import GOAL, ROUTE_CHAT, Fake, Proc, capacity, planact, relay  # noqa: E402
from tests.e2e.server import free_port, server_env  # noqa: E402

# GOAL: not keyword-routed: a route call (JSON), then the streamed answer (prose)
CALLS = ("route", "auto_reply")
SHAPE = {"first_token_delay": 1.0, "chunks": 400, "chunk_delay": 0.03}
HARD_LIMIT = 3600.0


def counted_planact(tmp: Path, fake: Fake) -> tuple[Proc, str, Path]:
    port = free_port()
    work = tmp / "planact-counted"
    work.mkdir()
    counts = work / "counts.json"
    env = {**server_env(work, fake.url), "LOG_LEVEL": "WARNING"}
    argv = [sys.executable, str(ROOT / "bench" / "counted_serve.py"), "--counts", str(counts)]
    proc = Proc("planact-counted", [*argv, "--port", str(port)], env, work)
    url = f"http://127.0.0.1:{port}"
    proc.wait_healthy(f"{url}/api/health")
    return proc, url, counts


async def read_counts(proc: Proc, path: Path) -> dict[str, int]:
    path.unlink(missing_ok=True)
    os.kill(proc.pid, signal.SIGUSR1)
    deadline = time.monotonic() + 30
    while not path.exists():
        if time.monotonic() > deadline:
            raise RuntimeError("the counted server wrote no counts")
        await asyncio.sleep(0.05)
    counts: dict[str, int] = json.loads(path.read_text())
    return counts


def relay_rows(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        (rows,) = conn.execute("SELECT count(*) FROM messages").fetchone()
    return int(rows)


async def writes_per_run(
    tmp: Path, fake: Fake, relay_proc: Proc, relay_url: str, runs: int, show_sql: int
) -> None:
    """Statements, rows and transactions per run (planact counted, the relay's rows)."""
    proc, url, path = counted_planact(tmp, fake)
    try:
        await capacity(proc, fake.proc, url, 1, False, 1, GOAL, CALLS)  # warm
        before = await read_counts(proc, path)
        got = await capacity(proc, fake.proc, url, runs, False, 1, GOAL, CALLS)
        after = await read_counts(proc, path)
    finally:
        proc.stop()
    done = runs - int(got["failures"])
    rows_before = relay_rows(tmp / "relay.db")
    relay_got = await capacity(relay_proc, fake.proc, relay_url, runs, True, 1, GOAL, CALLS)
    relay_done = runs - int(relay_got["failures"])
    relay_per_run = (relay_rows(tmp / "relay.db") - rows_before) / max(relay_done, 1)
    keys = sorted(set(after) | set(before), key=lambda k: (not k.startswith("statements"), k))
    print(f"\nwrites per run ({done} planact runs, {relay_done} relay runs, {runs} concurrent)")
    sql = [k for k in keys if k.startswith("sql: ")]
    keys = [k for k in keys if not k.startswith("sql: ")]
    for key in keys:
        value = (after.get(key, 0) - before.get(key, 0)) / max(done, 1)
        print(f"  planact {key:22} {value:7.1f}", flush=True)
    per_statement = {k: (after.get(k, 0) - before.get(k, 0)) / max(done, 1) for k in sql}
    print("  planact statements per run by text (the most frequent first):")
    for key, value in sorted(per_statement.items(), key=lambda kv: -kv[1])[:show_sql]:
        print(f"    {value:6.1f}  {key[5:]}")
    print(f"  relay   rows written           {relay_per_run:7.1f}")
    print(f"  relay   transactions           {relay_per_run:7.1f}  (autocommit: one per row)")


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def spread(values: list[float], fmt: str = ".2f") -> str:
    return f"{median(values):{fmt}} ({min(values):{fmt}}-{max(values):{fmt}})"


async def main(args: argparse.Namespace) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="planact-bench-cpu-"))
    procs: list[Proc] = []
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the start")
    try:
        fake = Fake(tmp)
        procs.append(fake.proc)
        fake.auto(SHAPE, {"route": ROUTE_CHAT})
        servers: dict[str, tuple[Proc, str, bool]] = {}
        proc, url = relay(tmp, fake)
        procs.append(proc)
        servers["relay"] = (proc, url, True)
        proc, url = planact(tmp, fake, "planact")
        procs.append(proc)
        servers["planact"] = (proc, url, False)
        if args.base_tree:  # the same server from another commit, measured alongside
            proc, url = serve(tmp, fake, "base", args.base_tree)
            procs.append(proc)
            servers["base"] = (proc, url, False)
            print(f"base: {git(args.base_tree, 'log', '-1', '--format=%h %s')[:90]}")
            print(f"  ({code_of(args.base_tree)})")
        for proc, url, is_relay in servers.values():  # warm: imports, pools, migrations
            got = await capacity(proc, fake.proc, url, 2, is_relay, 1, GOAL, CALLS)
            if got["failures"]:
                raise SystemExit(f"warm-up failed on {url}; see the logs in {tmp}")
        if args.count_runs:
            relay_proc, relay_url, _ = servers["relay"]
            await writes_per_run(tmp, fake, relay_proc, relay_url, args.count_runs, args.show_sql)
        levels = [int(x) for x in args.levels.split(",")]
        summary: list[str] = []
        for concurrent in levels:
            results: dict[str, list[dict[str, float]]] = {name: [] for name in servers}
            for r in range(args.repeats):
                order = list(servers) if r % 2 == 0 else list(reversed(servers))
                for name in order:
                    proc, url, is_relay = servers[name]
                    spy = profiler(args.profile, proc, f"{name}-{concurrent}-{r + 1}")
                    got = await capacity(
                        proc, fake.proc, url, concurrent, is_relay, args.runs_each, GOAL, CALLS
                    )
                    if spy is not None:
                        spy.send_signal(signal.SIGINT)
                        await asyncio.to_thread(spy.wait, 60)
                    got["load"] = os.getloadavg()[0]
                    results[name].append(got)
                    print(
                        f"  {concurrent} concurrent, repeat {r + 1}, {name:7}: "
                        f"CPU {got['cpu_ms_per_run']:.0f} ms/run ({got['cpu_pct']:.0f}% of a "
                        f"core), {got['runs_per_s']:.2f} runs/s "
                        f"({got['runs_per_s'] / got['ideal'] * 100:.0f}% of ideal), "
                        f"health p99 {got['health_p99_ms']:.0f} ms, "
                        f"{got['deltas_per_run']:.0f} deltas/run, "
                        f"failed {got['failures']:.0f}, load {got['load']:.1f}",
                        flush=True,
                    )
            line = [f"{concurrent} concurrent, {args.repeats} repeat(s), ÷ the relay:"]
            for name in [n for n in servers if n != "relay"]:
                pairs = list(zip(results[name], results["relay"], strict=True))
                cpu = [p["cpu_ms_per_run"] / b["cpu_ms_per_run"] for p, b in pairs]
                rps = [p["runs_per_s"] / b["runs_per_s"] for p, b in pairs]
                line.append(f"  {name:7} CPU per run {spread(cpu)} (goal <= 1.2)")
                line.append(f"  {name:7} runs/s      {spread(rps)} (goal >= 0.95)")
            for name, rows in results.items():
                line.append(
                    f"  {name:7} CPU ms/run {spread([x['cpu_ms_per_run'] for x in rows], '.0f')}"
                    f", runs/s {spread([x['runs_per_s'] for x in rows])}"
                    f", health p99 ms {spread([x['health_p99_ms'] for x in rows], '.0f')}"
                    f", deltas/run {median([x['deltas_per_run'] for x in rows]):.0f}"
                    f", failed {sum(x['failures'] for x in rows):.0f}"
                )
            summary += line
            print("\n".join(line), flush=True)
        print(f"\nload average {os.getloadavg()[0]:.1f} at the end; summary:")
        print("\n".join(summary))
    finally:
        for proc in reversed(procs):
            proc.stop()


def options(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--levels", default="50,200,500", help="concurrent runs, comma-separated")
    parser.add_argument("--repeats", type=int, default=1, help="measurements per server, level")
    parser.add_argument("--runs-each", type=int, default=1, help="runs per client a measurement")
    parser.add_argument(
        "--count-runs", type=int, default=10, help="runs counted for writes per run (0: skip)"
    )
    parser.add_argument(
        "--show-sql", type=int, default=0, help="print this many of the most frequent statements"
    )
    parser.add_argument(
        "--base", help="also measure planact at this commit (a git worktree made and removed)"
    )
    parser.add_argument("--profile", help="a folder for py-spy profiles of each measurement")
    parser.add_argument("--quick", action="store_true", help="20 concurrent, a smoke run")
    args = parser.parse_args(argv)
    if args.quick:
        args.levels, args.repeats, args.count_runs = "20", 1, 4
    return args


if __name__ == "__main__":
    parsed = options()
    parsed.base_tree = None
    if parsed.base:
        parsed.base_tree = tempfile.mkdtemp(prefix="planact-bench-cpu-base-")
        git(ROOT, "worktree", "add", "--detach", parsed.base_tree, parsed.base)

    async def bounded() -> None:
        async with asyncio.timeout(HARD_LIMIT):
            await main(parsed)

    try:
        asyncio.run(bounded())
    finally:
        if parsed.base_tree:
            git(ROOT, "worktree", "remove", "--force", parsed.base_tree)
