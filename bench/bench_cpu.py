"""CPU per streamed run: `planact serve` against the minimal relay (bench/relay.py) with
the same live deltas, side by side in one run.

  uv run python bench/bench_cpu.py [--levels 50,200,500] [--repeats 1] [--runs-each 1]
      [--count-runs 10] [--show-sql N] [--base REF] [--same-process] [--profile DIR] [--quick]
      [--relay-aiohttp]

Everything runs on loopback: the fake model (tests/fakellm.py), planact (SQLite) and the
relay, each in its own process, stopped by PID at the end. Each run is a route call and a
streamed answer (two model calls, each 1 s to the first token then 400 chunks 30 ms apart);
the relay makes the same two calls and forwards the answer as the same coalesced deltas. At
each level the servers are loaded one at a time, alternating which goes first (slow drift
in the machine's load falls on both), and /api/health is probed every 50 ms meanwhile.
Every measurement gets a new server process, warmed by two runs and stopped after it: a
process start's luck (memory layout, hash seed) stayed with all the repeats of one process
and moved the ratio at 50 concurrent by more than a change's effect; --same-process keeps
one process per server for the whole bench (the behaviour before).
Prints per level: server CPU per run (its process's CPU time / completed runs), runs/s,
/api/health p99, deltas per run, and planact ÷ relay. Before the load, a separate planact
that counts its SQL (bench/counted_serve.py: SQLAlchemy events) and the relay run
COUNT_RUNS runs each: statements, rows written and transactions per run.

--base REF also runs planact at commit REF (a git worktree, the same interpreter with
PYTHONPATH on it: the commits must share their dependencies), measured alongside: the
before and after of a change in one run.

--relay-aiohttp also measures the relay reading the model over aiohttp's connections
(`relay.py --aiohttp`, the transport planact's model client uses) and prints each planact
against it too: planact's cost beyond the relay's with the same model client.

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
from bench.bench_stream import GOAL, ROUTE_CHAT, Fake, Proc, capacity, one_run, relay  # noqa: E402
from tests.e2e.server import server_env  # noqa: E402
from tests.support.ports import free_port  # noqa: E402

# GOAL: not keyword-routed: a route call (JSON), then the streamed answer (prose)
CALLS = ("route", "auto_reply")
SHAPE = {"first_token_delay": 1.0, "chunks": 400, "chunk_delay": 0.03}
WARM_SHAPE = {"chunks": 400}  # the same replies without the waits: a warm-up in a second
HARD_LIMIT = 3600.0
RELAY_AIOHTTP = "relay-aiohttp"  # the relay with planact's model transport (--relay-aiohttp)


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
    tmp: Path, fake: Fake, relay_proc: Proc, relay_url: str, db: Path, runs: int, show_sql: int
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
    rows_before = relay_rows(db)
    relay_got = await capacity(relay_proc, fake.proc, relay_url, runs, True, 1, GOAL, CALLS)
    relay_done = runs - int(relay_got["failures"])
    relay_per_run = (relay_rows(db) - rows_before) / max(relay_done, 1)
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


Server = tuple[Proc, str, bool]


class Servers:
    """Starts each server under test: once for the whole bench (--same-process), or anew
    for every measurement (the default), each in its own folder and warmed before use."""

    def __init__(
        self, tmp: Path, fake: Fake, base_tree: str | None, relay_aiohttp: bool = False
    ) -> None:
        self.tmp, self.fake, self.base_tree = tmp, fake, base_tree
        self.names = ["relay", "planact"] + (["base"] if base_tree else [])
        if relay_aiohttp:
            self.names.append(RELAY_AIOHTTP)
        self.started = 0
        self.kept: dict[str, Server] = {}

    def start(self, name: str) -> Server:
        self.started += 1
        folder = f"{name}-{self.started}"
        if name in ("relay", RELAY_AIOHTTP):
            work = self.tmp / folder
            work.mkdir()
            proc, url = relay(work, self.fake, *(["--aiohttp"] if name == RELAY_AIOHTTP else []))
            return proc, url, True
        proc, url = serve(self.tmp, self.fake, folder, self.base_tree if name == "base" else None)
        return proc, url, False

    async def warm(self, server: Server) -> Server:
        """Imports, pools, migrations: two runs before a measurement (their model streams
        the same chunks without the waits)."""
        proc, url, is_relay = server
        if is_relay:
            body, path = {"goal": GOAL, "calls": list(CALLS)}, "/run"
        else:
            body, path = {"goal": GOAL}, "/api/agent/run"
        self.fake.auto(WARM_SHAPE, {"route": ROUTE_CHAT})
        try:
            ends = await asyncio.gather(
                *(asyncio.to_thread(one_run, url, body, path) for _ in range(2))
            )
        except Exception as exc:  # an HTTP error, a timeout: the process is stopped too
            ends = [repr(exc)]
        finally:
            self.fake.auto(SHAPE, {"route": ROUTE_CHAT})
        if ends != ["completed", "completed"]:
            proc.stop()
            raise SystemExit(f"warm-up failed on {url} ({ends}); see the logs in {self.tmp}")
        return server

    async def get(self, name: str, fresh: bool) -> Server:
        if fresh:
            return await self.warm(self.start(name))
        if name not in self.kept:
            self.kept[name] = await self.warm(self.start(name))
        return self.kept[name]

    def stop_all(self) -> None:
        for proc, _, _ in self.kept.values():
            proc.stop()


async def main(args: argparse.Namespace) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="planact-bench-cpu-"))
    fresh = not args.same_process
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the start")
    print("servers: " + ("new processes for every measurement" if fresh else "one process each"))
    fake = Fake(tmp)
    servers = Servers(tmp, fake, args.base_tree, args.relay_aiohttp)
    try:
        fake.auto(SHAPE, {"route": ROUTE_CHAT})
        if args.base_tree:  # the same server from another commit, measured alongside
            print(f"base: {git(args.base_tree, 'log', '-1', '--format=%h %s')[:90]}")
            print(f"  ({code_of(args.base_tree)})")
        if args.count_runs:
            relay_proc, relay_url, _ = await servers.warm(servers.start("relay"))
            try:
                db = relay_proc.log.parent / "relay.db"  # relay() keeps it beside its log
                await writes_per_run(
                    tmp, fake, relay_proc, relay_url, db, args.count_runs, args.show_sql
                )
            finally:
                relay_proc.stop()
        levels = [int(x) for x in args.levels.split(",")]
        summary: list[str] = []
        for concurrent in levels:
            results: dict[str, list[dict[str, float]]] = {name: [] for name in servers.names}
            for r in range(args.repeats):
                order = servers.names if r % 2 == 0 else list(reversed(servers.names))
                for name in order:
                    proc, url, is_relay = await servers.get(name, fresh)
                    try:
                        spy = profiler(args.profile, proc, f"{name}-{concurrent}-{r + 1}")
                        got = await capacity(
                            proc, fake.proc, url, concurrent, is_relay, args.runs_each, GOAL, CALLS
                        )
                        if spy is not None:
                            spy.send_signal(signal.SIGINT)
                            await asyncio.to_thread(spy.wait, 60)
                    finally:
                        if fresh:
                            proc.stop()
                    got["load"] = os.getloadavg()[0]
                    results[name].append(got)
                    print(
                        f"  {concurrent} concurrent, repeat {r + 1}, {name:13}: "
                        f"CPU {got['cpu_ms_per_run']:.0f} ms/run ({got['cpu_pct']:.0f}% of a "
                        f"core), {got['runs_per_s']:.2f} runs/s "
                        f"({got['runs_per_s'] / got['ideal'] * 100:.0f}% of ideal), "
                        f"health p99 {got['health_p99_ms']:.0f} ms, "
                        f"{got['deltas_per_run']:.0f} deltas/run, "
                        f"failed {got['failures']:.0f}, load {got['load']:.1f}",
                        flush=True,
                    )
            lines = level_summary(concurrent, args.repeats, results)
            summary += lines
            print("\n".join(lines), flush=True)
        print(f"\nload average {os.getloadavg()[0]:.1f} at the end; summary:")
        print("\n".join(summary))
    finally:
        servers.stop_all()
        fake.proc.stop()


def level_summary(
    concurrent: int, repeats: int, results: dict[str, list[dict[str, float]]]
) -> list[str]:
    """Each server against the relay measured in the same repeat (paired ratios); with a
    relay over aiohttp, each planact against it too."""
    line = [f"{concurrent} concurrent, {repeats} repeat(s), ÷ the relay:"]
    planacts = [n for n in results if n not in ("relay", RELAY_AIOHTTP)]
    for name in planacts:
        pairs = list(zip(results[name], results["relay"], strict=True))
        cpu = [p["cpu_ms_per_run"] / b["cpu_ms_per_run"] for p, b in pairs]
        rps = [p["runs_per_s"] / b["runs_per_s"] for p, b in pairs]
        line.append(f"  {name:13} CPU per run {spread(cpu)} (goal <= 1.2)")
        line.append(f"  {name:13} runs/s      {spread(rps)} (goal >= 0.95)")
    if RELAY_AIOHTTP in results:
        line.append(f"  ÷ {RELAY_AIOHTTP} (the relay with planact's model transport):")
        for name in [*planacts, "relay"]:
            pairs = list(zip(results[name], results[RELAY_AIOHTTP], strict=True))
            cpu = [p["cpu_ms_per_run"] / b["cpu_ms_per_run"] for p, b in pairs]
            line.append(f"  {name:13} CPU per run {spread(cpu)}")
    for name, rows in results.items():
        line.append(
            f"  {name:13} CPU ms/run {spread([x['cpu_ms_per_run'] for x in rows], '.0f')}"
            f", runs/s {spread([x['runs_per_s'] for x in rows])}"
            f", health p99 ms {spread([x['health_p99_ms'] for x in rows], '.0f')}"
            f", deltas/run {median([x['deltas_per_run'] for x in rows]):.0f}"
            f", failed {sum(x['failures'] for x in rows):.0f}"
        )
    return line


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
    parser.add_argument(
        "--same-process",
        action="store_true",
        help="start each server once and measure every repeat on it (new processes otherwise)",
    )
    parser.add_argument(
        "--relay-aiohttp",
        action="store_true",
        help="also measure the relay reading the model over aiohttp, as planact does",
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
