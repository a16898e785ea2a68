"""The model stream, from the fake model to the user's SSE stream.

  uv run python bench/bench_stream.py [--quick] [--skip-capacity]

Everything runs on loopback: the fake model (tests/fakellm.py), `planact serve`, and a
minimal relay baseline (bench/relay.py: Starlette + one SQLite row and one SSE event per
message), each in its own process, stopped by PID at the end. Ratios are measured side by
side in the same run. Prints:

1. client CPU per streamed chunk: raw httpx + json.loads (the floor) vs the lean path vs
   litellm, with the reply already buffered (2000 chunks at once) and spaced (5 ms apart);
2. server CPU per run with a 2000-chunk reply through the real `planact serve` (lean path,
   and LLM_CLIENT=litellm) vs the relay;
3. capacity at 1 s to first token, 400 chunks 30 ms apart, two model calls a run (route +
   answer): runs/s against the ideal (concurrency / 25.9 s), /api/health p99, server CPU,
   and memory per run mid-reply, at 100 and 200 concurrent runs (planact) and 200 (relay).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from backend.llm.litellm_client import LiteLLM  # noqa: E402
from backend.llm.openai_compat import OpenAICompatLLM  # noqa: E402
from tests.e2e.server import PLANACT, server_env  # noqa: E402
from tests.support.ports import free_port  # noqa: E402

CLK = os.sysconf("SC_CLK_TCK")
MSGS = [{"role": "user", "content": "hi"}]
GOAL = "Please handle my request"  # no routing keyword: a `route` call, then the answer
ROUTE_CHAT = '{"task_type": "general_chat", "needs_tools": false}'
# the capacity shape: many concurrent streamed runs
FIRST_TOKEN, CHUNKS, SPACING = 1.0, 400, 0.03
CALL_SECONDS = FIRST_TOKEN + (CHUNKS - 1) * SPACING
# memory mid-reply: the reply is half read this long after its midpoint in time
FIRST_CHUNK_SLACK = 0.2
# client CPU: the best of this many interleaved rounds
ROUNDS = 3
# the whole benchmark gives up after this long
HARD_LIMIT = 900.0


# -- processes ---------------------------------------------------------------------------


class Proc:
    def __init__(self, name: str, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        self.name = name
        self.log = cwd / f"{name}.log"
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                argv,
                cwd=cwd,
                env={**os.environ, **env},
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait_healthy(self, url: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited: {self.log.read_text()[-2000:]}")
            try:
                if httpx.get(url, timeout=1).status_code < 500:
                    return
            except httpx.TransportError:
                time.sleep(0.05)
        raise RuntimeError(f"{self.name} not answering after {timeout}s")

    def cpu(self) -> float:
        """CPU seconds (user + system) the process and the children it waited for (the
        checkpoints' git commands, a sandbox's commands) have used."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return sum(int(f) for f in fields[11:15]) / CLK

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)


class Fake:
    def __init__(self, tmp: Path) -> None:
        self.port = free_port()
        self.proc = Proc(
            "fakellm",
            [sys.executable, str(ROOT / "tests" / "fakellm.py"), "--port", str(self.port)],
            {},
            tmp,
        )
        self.proc.wait_healthy(f"{self.url}/models")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def auto(self, shape: dict[str, Any], replies: dict[str, str] | None = None) -> None:
        body = {"on": True, "shape": shape, "replies": replies or {}}
        httpx.post(f"http://127.0.0.1:{self.port}/_control/auto", json=body).raise_for_status()


def planact(tmp: Path, fake: Fake, name: str, **env: str) -> tuple[Proc, str]:
    port = free_port()
    work = tmp / name
    work.mkdir()
    full = {**server_env(work, fake.url), "LOG_LEVEL": "WARNING", **env}
    proc = Proc(name, [PLANACT, "serve", "--port", str(port)], full, work)
    url = f"http://127.0.0.1:{port}"
    proc.wait_healthy(f"{url}/api/health")
    return proc, url


def relay(tmp: Path, fake: Fake, *flags: str) -> tuple[Proc, str]:
    port = free_port()
    argv = [
        sys.executable,
        str(ROOT / "bench" / "relay.py"),
        "--port",
        str(port),
        "--model-url",
        fake.url,
        "--db",
        str(tmp / "relay.db"),
        *flags,
    ]
    proc = Proc("relay", argv, {}, tmp)
    url = f"http://127.0.0.1:{port}"
    proc.wait_healthy(f"{url}/api/health")
    return proc, url


# -- 1. client CPU per chunk ---------------------------------------------------------------


async def raw_httpx(client: httpx.AsyncClient, url: str) -> str:
    body = {"model": "fake", "messages": MSGS, "stream": True, "max_tokens": 8192}
    parts: list[str] = []
    async with client.stream(
        "POST", f"{url}/chat/completions", json=body, headers={"X-Agent-Stage": "auto_reply"}
    ) as resp:
        async for line in resp.aiter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                chunk = json.loads(line[6:])
                for choice in chunk.get("choices") or []:
                    piece = (choice.get("delta") or {}).get("content")
                    if piece:
                        parts.append(piece)
    return "".join(parts)


async def cpu_per_chunk(fake: Fake, chunks: int, spacing: float, calls: int) -> dict[str, float]:
    fake.auto({"chunks": chunks, "chunk_delay": spacing})
    client = httpx.AsyncClient(timeout=None)
    lean = OpenAICompatLLM("openai/fake", base_url=fake.url)
    lite = LiteLLM("openai/fake", api_key="sk-fake", base_url=fake.url)
    sink: list[str] = []

    def on_delta(kind: str, text: str) -> None:
        sink.append(text)

    async def lean_call() -> str:
        return (await lean.complete(stage="auto_reply", messages=MSGS)).text

    async def lean_delta_call() -> str:
        sink.clear()
        return (await lean.complete(stage="auto_reply", messages=MSGS, on_delta=on_delta)).text

    async def lite_call() -> str:
        return (await lite.complete(stage="auto_reply", messages=MSGS)).text

    variants: dict[str, Callable[[], Awaitable[str]]] = {
        "httpx + json.loads": lambda: raw_httpx(client, fake.url),
        "lean path": lean_call,
        "lean path + on_delta": lean_delta_call,
        "litellm path": lite_call,
    }
    for call in variants.values():
        await call()  # warm: connections, imports, price lookup
    # interleaved rounds, the best of each: other load on the machine only adds time
    out = {name: float("inf") for name in variants}
    for _ in range(ROUNDS):
        for name, call in variants.items():
            start = time.process_time()
            for _ in range(calls):
                await call()
            spent = (time.process_time() - start) / (calls * chunks) * 1e6
            out[name] = min(out[name], spent)
    await client.aclose()
    await lean.aclose()
    return out


async def memory_mid_reply(
    fake: Fake, concurrent: int, chunks: int, spacing: float
) -> dict[str, float]:
    """KB of Python memory one call holds halfway through its reply (tracemalloc, all
    calls of a variant in flight at once)."""
    fake.auto({"chunks": chunks, "chunk_delay": spacing})
    client = httpx.AsyncClient(timeout=None, limits=httpx.Limits(max_connections=None))
    lean = OpenAICompatLLM("openai/fake", base_url=fake.url)
    lite = LiteLLM("openai/fake", api_key="sk-fake", base_url=fake.url)

    async def lean_call() -> str:
        return (await lean.complete(stage="auto_reply", messages=MSGS)).text

    async def lite_call() -> str:
        return (await lite.complete(stage="auto_reply", messages=MSGS)).text

    variants: dict[str, Callable[[], Awaitable[str]]] = {
        "httpx + json.loads": lambda: raw_httpx(client, fake.url),
        "lean path": lean_call,
        "litellm path": lite_call,
    }
    out: dict[str, float] = {}
    for name, call in variants.items():
        await asyncio.gather(*(call() for _ in range(concurrent)))  # warm the pools
        gc.collect()
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        tasks = [asyncio.ensure_future(call()) for _ in range(concurrent)]
        await asyncio.sleep(FIRST_CHUNK_SLACK + chunks * spacing / 2)
        mid = tracemalloc.get_traced_memory()[0]
        await asyncio.gather(*tasks)
        tracemalloc.stop()
        out[name] = (mid - base) / concurrent / 1024
    await client.aclose()
    await lean.aclose()
    return out


# -- 2. server CPU per run -----------------------------------------------------------------


def one_run(url: str, body: dict[str, Any], path: str) -> str:
    """POST and read the SSE stream to its end; the run's final status."""
    status = "?"
    with httpx.stream("POST", f"{url}{path}", json=body, timeout=120) as resp:
        resp.raise_for_status()
        event = ""
        for line in resp.iter_lines():
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:") and event == "end":
                status = json.loads(line[5:])["status"]
    return status


def server_cpu_per_run(proc: Proc, url: str, relay_api: bool, runs: int) -> float:
    if relay_api:
        body, path = {"goal": "hi", "calls": ["auto_reply"]}, "/run"
    else:
        body, path = {"goal": "hi", "mode": "chat"}, "/api/agent/run"
    for _ in range(2):
        assert one_run(url, body, path) == "completed"
    start = proc.cpu()
    for _ in range(runs):
        assert one_run(url, body, path) == "completed"
    return (proc.cpu() - start) / runs * 1000


# -- 3. capacity ---------------------------------------------------------------------------


async def capacity(
    proc: Proc,
    model: Proc,
    url: str,
    concurrent: int,
    relay_api: bool,
    runs_each: int = 2,
    goal: str = GOAL,
    calls: tuple[str, ...] = ("route", "auto_reply"),
) -> dict[str, float]:
    """``goal`` for planact; ``calls``: the model calls the relay makes for it (the same)."""
    if relay_api:
        body, path = {"goal": goal, "calls": list(calls)}, "/run"
    else:
        body, path = {"goal": goal}, "/api/agent/run"
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    client = httpx.AsyncClient(base_url=url, timeout=httpx.Timeout(300), limits=limits)
    durations: list[float] = []
    failures = 0
    deltas = 0
    stagger = 5.0
    first_done = asyncio.Event()

    async def worker(i: int) -> None:
        nonlocal failures, deltas
        await asyncio.sleep(stagger * i / concurrent)
        for _ in range(runs_each):
            began = time.monotonic()
            ok = False
            try:
                tail = b""
                async with client.stream("POST", path, json=body) as resp:
                    async for block in resp.aiter_bytes():
                        deltas += block.count(b"event: delta")
                        tail = (tail + block)[-4096:]  # the end event may span blocks
                end = tail.rfind(b"event: end")
                ok = end >= 0 and b"completed" in tail[end:]
            except httpx.HTTPError:
                ok = False
            if ok:
                durations.append(time.monotonic() - began)
            else:
                failures += 1
        first_done.set()

    latencies: list[float] = []
    stop_probe = threading.Event()

    def prober() -> None:
        """In its own thread, so that the load generator's loop does not delay it."""
        with httpx.Client(base_url=url, timeout=60) as health:
            if stop_probe.wait(stagger):
                return
            while not stop_probe.is_set():
                began = time.perf_counter()
                health.get("/api/health").raise_for_status()
                latencies.append((time.perf_counter() - began) * 1000)
                stop_probe.wait(0.05)

    async def stop_probing() -> None:
        await first_done.wait()
        stop_probe.set()

    rss_before = proc.rss_mb()
    rss_mid = 0.0

    async def memory() -> None:
        nonlocal rss_mid
        await asyncio.sleep(stagger + CALL_SECONDS * 1.5)  # every run is mid-reply
        rss_mid = proc.rss_mb()

    cpu_start, model_start, wall_start = proc.cpu(), model.cpu(), time.monotonic()
    tasks = [asyncio.create_task(worker(i)) for i in range(concurrent)]
    probe = asyncio.create_task(asyncio.to_thread(prober))
    mem, stopper = asyncio.create_task(memory()), asyncio.create_task(stop_probing())
    await asyncio.gather(*tasks)
    await asyncio.gather(probe, mem, stopper)
    wall = time.monotonic() - wall_start
    cpu_s = proc.cpu() - cpu_start
    cpu = cpu_s / wall * 100
    model_cpu = (model.cpu() - model_start) / wall * 100
    await client.aclose()
    mean = statistics.fmean(durations) if durations else float("inf")
    latencies.sort()
    p99 = latencies[int(len(latencies) * 0.99) - 1] if latencies else float("nan")
    return {
        "runs_per_s": concurrent / mean,
        "ideal": concurrent / (2 * CALL_SECONDS),
        "run_s": mean,
        "health_p99_ms": p99,
        "health_n": len(latencies),
        "cpu_pct": cpu,
        "cpu_ms_per_run": cpu_s / max(len(durations), 1) * 1000,
        "deltas_per_run": deltas / max(len(durations), 1),
        "model_cpu_pct": model_cpu,
        "mb_per_run": max(0.0, rss_mid - rss_before) / concurrent,
        "failures": failures,
    }


# -- main ----------------------------------------------------------------------------------


def print_table(title: str, rows: list[tuple[str, ...]]) -> None:
    print(f"\n{title}")
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)))


async def main(args: argparse.Namespace) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="planact-bench-stream-"))
    procs: list[Proc] = []
    load = os.getloadavg()[0]
    print(f"{os.cpu_count()} CPUs, load average {load:.1f} at the start (figures need idle cores)")
    try:
        fake = Fake(tmp)
        procs.append(fake.proc)

        # 1
        n_buf = 500 if args.quick else 2000
        n_spaced = 60 if args.quick else 200
        buffered = await cpu_per_chunk(fake, n_buf, 0.0, 2 if args.quick else 3)
        spaced = await cpu_per_chunk(fake, n_spaced, 0.005, 1 if args.quick else 2)
        floor_b, floor_s = buffered["httpx + json.loads"], spaced["httpx + json.loads"]
        rows: list[tuple[str, ...]] = [
            ("client", f"buffered ({n_buf})", "ratio", "spaced 5 ms", "ratio")
        ]
        for name in buffered:
            rows.append(
                (
                    name,
                    f"{buffered[name]:.1f} µs/chunk",
                    f"{buffered[name] / floor_b:.2f}x",
                    f"{spaced[name]:.1f} µs/chunk",
                    f"{spaced[name] / floor_s:.2f}x",
                )
            )
        print_table("1. client CPU per streamed chunk (ratio to httpx + json.loads)", rows)
        n_mem = 100 if args.quick else 400
        held = await memory_mid_reply(fake, 20 if args.quick else 50, n_mem, 0.01)
        rows = [("client", f"held per call halfway through a {n_mem}-chunk reply")]
        rows += [(k, f"{v:.1f} KB") for k, v in held.items()]
        print_table("1b. client memory mid-reply (tracemalloc)", rows)

        # 2
        fake.auto({"chunks": 2000})
        runs = 3 if args.quick else 10
        lean, lean_url = planact(tmp, fake, "planact-lean")
        procs.append(lean)
        lite, lite_url = planact(tmp, fake, "planact-litellm", LLM_CLIENT="litellm")
        procs.append(lite)
        base, base_url = relay(tmp, fake)
        procs.append(base)
        per_run = {
            "relay (baseline)": server_cpu_per_run(base, base_url, True, runs),
            "planact, lean path": server_cpu_per_run(lean, lean_url, False, runs),
            "planact, LLM_CLIENT=litellm": server_cpu_per_run(lite, lite_url, False, runs),
        }
        lite.stop()
        floor = per_run["relay (baseline)"]
        rows = [("server", "CPU per run", "ratio")]
        rows += [(k, f"{v:.0f} ms", f"{v / floor:.2f}x") for k, v in per_run.items()]
        print_table("2. server CPU per run, one 2000-chunk reply (ratio to the relay)", rows)

        if args.skip_capacity:
            return
        # 3
        # a fresh server: its memory before the load is its idle memory
        lean.stop()
        fresh, fresh_url = planact(tmp, fake, "planact-capacity")
        procs.append(fresh)
        assert one_run(fresh_url, {"goal": "hi", "mode": "chat"}, "/api/agent/run") == "completed"
        fake.auto(
            {"first_token_delay": FIRST_TOKEN, "chunks": CHUNKS, "chunk_delay": SPACING},
            {"route": ROUTE_CHAT},
        )
        rows = [
            (
                "server",
                "concurrent",
                "runs/s",
                "of ideal",
                "health p99",
                "server CPU",
                "fake model CPU",
                "MB/run mid-reply",
                "failed",
            )
        ]
        counts = (20,) if args.quick else (100, 200)
        levels = [(fresh, fresh_url, "planact", c, False) for c in counts]
        levels.append((base, base_url, "relay", 20 if args.quick else 200, True))
        for proc, url, name, concurrent, relay_api in levels:
            got = await capacity(
                proc, fake.proc, url, concurrent, relay_api, 1 if args.quick else 2
            )
            rows.append(
                (
                    name,
                    str(concurrent),
                    f"{got['runs_per_s']:.2f}",
                    f"{got['runs_per_s'] / got['ideal'] * 100:.0f}% of {got['ideal']:.2f}",
                    f"{got['health_p99_ms']:.1f} ms (n={got['health_n']:.0f})",
                    f"{got['cpu_pct']:.0f}%",
                    f"{got['model_cpu_pct']:.0f}%",
                    f"{got['mb_per_run']:.2f}",
                    f"{got['failures']:.0f}",
                )
            )
        print(f"load average {os.getloadavg()[0]:.1f} at the end")
        print_table(
            f"3. capacity: {FIRST_TOKEN:g} s to first token, {CHUNKS} chunks {SPACING * 1000:g} ms "
            "apart, 2 model calls a run",
            rows,
        )
    finally:
        for proc in reversed(procs):
            proc.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, a smoke run")
    parser.add_argument("--skip-capacity", action="store_true")
    options = parser.parse_args()

    async def bounded() -> None:
        async with asyncio.timeout(HARD_LIMIT):
            await main(options)

    asyncio.run(bounded())
