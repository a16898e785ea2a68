"""What checkpointing costs: many concurrent streamed agent runs (planning + thinking, each
call 1 s to first token then 400 chunks 30 ms apart) through the current `planact serve` and
through the code before runs were checkpointed, measured in the same benchmark run.

  uv run python bench/bench_checkpoint.py [--levels 200,500] [--rounds 2] [--base REF]
      [--base-tree DIR] [--profile DIR] [--quick]

The baseline is a checkout of the commit before checkpoints (default: the parent of the
first checkpoint commit) in a git worktree (made here unless --base-tree names one, and
removed at the end), run by the same interpreter with PYTHONPATH on it (the two commits
share their dependencies). Both servers run side by side on loopback with a SQLite database
each, and one fake model (tests/fakellm.py); only one of them is loaded at a time, in the
order base, current, current, base, ... (alternating, so slow drift in the machine's load
falls on both). Prints per round and per level: runs/s (concurrency / mean run time),
server CPU per run, failures, and the ratio current / base with its spread. Asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bench_stream import Fake, Proc  # noqa: E402
from tests.e2e.server import PLANACT, server_env  # noqa: E402
from tests.support.ports import free_port  # noqa: E402

# the commit that added checkpoints (backend/agent/resume.py); the baseline is its parent
CHECKPOINT_COMMIT = "9fe146e"
GOAL = "write code"  # keyword-routed: a planning call, then a thinking call (write, finish)
FIRST_TOKEN, CHUNKS, SPACING = 1.0, 400, 0.03
CALL_SECONDS = FIRST_TOKEN + (CHUNKS - 1) * SPACING
STAGGER = 5.0  # the clients start spread over this many seconds


def serve(tmp: Path, fake: Fake, name: str, pythonpath: str | None) -> tuple[Proc, str]:
    port = free_port()
    work = tmp / name
    work.mkdir()
    env = {**server_env(work, fake.url), "LOG_LEVEL": "WARNING"}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    proc = Proc(name, [PLANACT, "serve", "--port", str(port)], env, work)
    url = f"http://127.0.0.1:{port}"
    proc.wait_healthy(f"{url}/api/health")
    return proc, url


def code_of(pythonpath: str | None) -> str:
    """Where the server's `backend` package comes from (the check that the base is the base)."""
    env = {**os.environ, **({"PYTHONPATH": pythonpath} if pythonpath else {})}
    out = subprocess.run(
        [sys.executable, "-c", "import backend; print(backend.__file__)"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd="/",  # not the checkout: `-c` puts the working directory first on sys.path
    )
    return str(Path(out.stdout.strip()).parent.parent)


async def load(proc: Proc, url: str, concurrent: int, runs_each: int) -> dict[str, float]:
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    client = httpx.AsyncClient(base_url=url, timeout=httpx.Timeout(600), limits=limits)
    durations: list[float] = []
    failures = 0
    reasons: Counter[str] = Counter()

    async def worker(i: int) -> None:
        nonlocal failures
        await asyncio.sleep(STAGGER * i / concurrent)
        for _ in range(runs_each):
            began = time.monotonic()
            tail, why = b"", ""
            try:
                async with client.stream("POST", "/api/agent/run", json={"goal": GOAL}) as resp:
                    if resp.status_code != 200:
                        why = f"HTTP {resp.status_code}"
                    async for block in resp.aiter_bytes():
                        tail = (tail + block)[-4096:]
            except httpx.HTTPError as exc:
                why = why or type(exc).__name__
            end = tail.rfind(b"event: end")
            if not why and end >= 0 and b"completed" in tail[end:]:
                durations.append(time.monotonic() - began)
            else:
                failures += 1
                reasons[why or "no completed end event"] += 1

    cpu0, wall0 = proc.cpu(), time.monotonic()
    await asyncio.gather(*(worker(i) for i in range(concurrent)))
    wall, cpu = time.monotonic() - wall0, proc.cpu() - cpu0
    await client.aclose()
    done = len(durations)
    mean = statistics.fmean(durations) if durations else float("inf")
    if reasons:
        print(f"  failures: {dict(reasons)}")
    return {
        "runs_per_s": concurrent / mean,
        "ideal": concurrent / (2 * CALL_SECONDS),
        "cpu_ms_per_run": cpu / max(done, 1) * 1000,
        "cpu_pct": cpu / wall * 100,
        "failures": failures,
        "load": os.getloadavg()[0],
    }


def profiler(folder: str | None, proc: Proc, name: str) -> subprocess.Popen[bytes] | None:
    """py-spy sampling the server (every thread) while it is loaded: collapsed stacks in
    FOLDER/NAME.txt (py-spy, a dev dependency: next to the interpreter, else on PATH)."""
    if not folder:
        return None
    Path(folder).mkdir(parents=True, exist_ok=True)
    beside = Path(sys.executable).with_name("py-spy")
    spy = str(beside) if beside.exists() else "py-spy"
    argv = [spy, "record", "--pid", str(proc.pid), "--format", "raw", "--rate", "200"]
    argv += ["--nonblocking", "--output", str(Path(folder) / f"{name}.txt")]
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} (range {min(values):.3f}-{max(values):.3f})"


def git(cwd: str | Path, *argv: str) -> str:
    return subprocess.run(
        ["git", *argv], cwd=cwd, capture_output=True, text=True, check=True
    ).stdout.strip()


async def main(args: argparse.Namespace, tmp: Path, base_tree: str) -> None:
    base_rev = git(base_tree, "log", "-1", "--format=%h %s")
    cur_rev = git(ROOT, "log", "-1", "--format=%h")
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the start")
    print(f"current: {cur_rev} ({code_of(None)})")
    print(f"base:    {base_rev[:90]} ({code_of(base_tree)})")
    procs: list[Proc] = []
    try:
        fake = Fake(tmp)
        procs.append(fake.proc)
        fake.auto({"first_token_delay": FIRST_TOKEN, "chunks": CHUNKS, "chunk_delay": SPACING})
        servers = {}
        for name, path in (("base", base_tree), ("current", None)):
            proc, url = serve(tmp, fake, name, path)
            procs.append(proc)
            servers[name] = (proc, url)
        # warm each once (imports, first migrations' aftermath, connection pools)
        for proc, url in servers.values():
            got = await load(proc, url, 2, 1)
            if got["failures"]:
                raise SystemExit(f"warm-up failed on {url}; see {tmp}")
        for name in servers:
            with sqlite3.connect(tmp / name / "planact.db") as db:
                (version,) = db.execute("SELECT version_num FROM alembic_version").fetchone()
            print(f"{name} database at migration {version}")
        levels = [int(x) for x in args.levels.split(",")]
        for concurrent in levels:
            results: dict[str, list[dict[str, float]]] = {"base": [], "current": []}
            for r in range(args.rounds):
                order = ("base", "current") if r % 2 == 0 else ("current", "base")
                for name in order:
                    proc, url = servers[name]
                    spy = profiler(args.profile, proc, f"{name}-{concurrent}-{r + 1}")
                    got = await load(proc, url, concurrent, args.runs_each)
                    if spy is not None:
                        spy.send_signal(signal.SIGINT)
                        await asyncio.to_thread(spy.wait, 60)
                    results[name].append(got)
                    print(
                        f"  {concurrent} concurrent, round {r + 1}, {name:7}: "
                        f"{got['runs_per_s']:.2f} runs/s "
                        f"({got['runs_per_s'] / got['ideal'] * 100:.0f}% of {got['ideal']:.2f}), "
                        f"CPU {got['cpu_ms_per_run']:.0f} ms/run "
                        f"({got['cpu_pct']:.0f}% of a core), "
                        f"failed {got['failures']:.0f}, load {got['load']:.1f}",
                        flush=True,
                    )
            rps = [
                c["runs_per_s"] / b["runs_per_s"]
                for b, c in zip(results["base"], results["current"], strict=True)
            ]
            cpu = [
                c["cpu_ms_per_run"] / b["cpu_ms_per_run"]
                for b, c in zip(results["base"], results["current"], strict=True)
            ]
            print(f"{concurrent} concurrent, {args.rounds} rounds, current / base:")
            print(f"  runs/s        {spread(rps)}")
            print(f"  CPU per run   {spread(cpu)}")
            for name in ("base", "current"):
                rows = results[name]
                print(
                    f"  {name:7}: runs/s {spread([x['runs_per_s'] for x in rows])}, "
                    f"CPU ms/run {spread([x['cpu_ms_per_run'] for x in rows])}, "
                    f"failed {sum(x['failures'] for x in rows):.0f}"
                )
        print(f"load average {os.getloadavg()[0]:.1f} at the end")
    finally:
        for proc in reversed(procs):
            proc.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--levels", default="200,500", help="concurrent runs, comma-separated")
    parser.add_argument("--rounds", type=int, default=2, help="measurements per server and level")
    parser.add_argument("--runs-each", type=int, default=2, help="runs per client a round")
    parser.add_argument("--base", help=f"the baseline commit (default {CHECKPOINT_COMMIT}^)")
    parser.add_argument("--base-tree", help="an existing checkout of the baseline")
    parser.add_argument("--profile", help="a folder for py-spy profiles of each measurement")
    parser.add_argument("--quick", action="store_true", help="20 concurrent, 1 round, a smoke run")
    options = parser.parse_args()
    if options.quick:
        options.levels, options.rounds, options.runs_each = "20", 1, 1
    scratch = Path(tempfile.mkdtemp(prefix="planact-bench-checkpoint-"))
    tree = options.base_tree
    if not tree:
        tree = str(scratch / "base-tree")
        git(ROOT, "worktree", "add", "--detach", tree, options.base or f"{CHECKPOINT_COMMIT}^")
    try:
        asyncio.run(main(options, scratch, tree))
    finally:
        if not options.base_tree:
            git(ROOT, "worktree", "remove", "--force", tree)
