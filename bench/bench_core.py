"""Core pipeline figures with a zero-latency fake model.

  uv run python bench/bench_core.py

Prints: model calls per run, framework overhead per model call (in-process, and over HTTP),
runs/s at 20 concurrent runs, server start -> healthy, POST -> first event. The HTTP figures
are taken with the default model client (LLM_CLIENT=auto: the lean OpenAI-compatible path)
and, as the baseline of the same run, with LLM_CLIENT=litellm.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from backend.agent.specialists import BUILTIN
from backend.config import Settings
from backend.llm.base import Completion, DeltaCallback
from backend.messages.bus import Bus
from backend.runs import RunManager
from backend.store.repo import Store
from tests.e2e.server import Server, server_env
from tests.fakellm import AUTO_REPLIES, FakeModelServer

GOAL = "write a python script that saves hello to out.txt"


class InstantLLM:
    """Answers at once with the fake server's default replies."""

    def __init__(self) -> None:
        self.calls = 0

    @property
    def default_model(self) -> str | None:
        return "instant"

    async def complete(
        self,
        *,
        stage: str,
        messages: list,  # type: ignore[type-arg]
        model: str | None = None,
        on_delta: DeltaCallback | None = None,
    ) -> Completion:
        self.calls += 1
        text = AUTO_REPLIES[stage]
        if on_delta is not None:
            on_delta("text", text)
        return Completion(text=text, model="instant", finish_reason="stop")


async def in_process(runs: int = 200) -> tuple[float, float]:
    """(model calls per run, ms of framework time per model call) with no HTTP at all."""
    tmp = Path(tempfile.mkdtemp(prefix="planact-bench-"))
    settings = Settings(
        _env_file=None, database_url=f"sqlite:///{tmp}/db.sqlite", workspace_dir=tmp / "ws"
    )
    store = Store(settings.database_url)
    store.migrate()
    llm = InstantLLM()
    manager = RunManager(settings, store, Bus(), llm, BUILTIN)
    t0 = time.perf_counter()
    for _ in range(runs):
        _cid, rid = await manager.start("1", GOAL)
        await manager.wait(rid)
    elapsed = time.perf_counter() - t0
    await manager.shutdown()
    await store.close()
    return llm.calls / runs, elapsed * 1000 / llm.calls


def http_figures(model: FakeModelServer, client: str, starts: int = 3) -> dict[str, float]:
    tmp = Path(tempfile.mkdtemp(prefix="planact-bench-"))
    env = server_env(tmp, model.base_url, LOG_LEVEL="WARNING", LLM_CLIENT=client)
    times = []
    server = None
    for _ in range(starts):
        t0 = time.perf_counter()
        server = Server(tmp, env).start()
        times.append(time.perf_counter() - t0)
        server.stop()
    server = Server(tmp, env).start()
    out: dict[str, float] = {"healthy_s": statistics.median(times) if times else 0.0}
    try:
        with httpx.Client(base_url=server.url, timeout=60) as c:
            # warm up (the first call imports and connects), then measure
            _stream_one(c)
            firsts, totals, calls_before = [], [], len(model.model.calls)
            for _ in range(20):
                first, total = _stream_one(c)
                firsts.append(first)
                totals.append(total)
            calls = (len(model.model.calls) - calls_before) / 20
            out["first_event_ms"] = statistics.median(firsts) * 1000
            out["run_ms"] = statistics.median(totals) * 1000
            out["calls_per_run_http"] = calls
            out["per_call_ms_http"] = statistics.median(totals) * 1000 / calls
        out["runs_per_s_20"] = asyncio.run(_concurrent(server.url, total=100, concurrency=20))
    finally:
        server.stop()
    return out


def _stream_one(c: httpx.Client) -> tuple[float, float]:
    t0 = time.perf_counter()
    first = None
    with c.stream("POST", "/api/agent/run", json={"goal": GOAL}) as resp:
        for line in resp.iter_lines():
            if first is None and line.startswith("data:"):
                first = time.perf_counter() - t0
            if line.startswith("event: end"):
                break
    return first or 0.0, time.perf_counter() - t0


async def _concurrent(url: str, total: int, concurrency: int) -> float:
    sem = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=120) as c:

        async def one() -> None:
            async with sem, c.stream("POST", "/api/agent/run", json={"goal": GOAL}) as resp:
                async for line in resp.aiter_lines():
                    if line.startswith("event: end"):
                        break

        t0 = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(total)))
        return total / (time.perf_counter() - t0)


def main() -> None:
    calls, overhead = asyncio.run(in_process())
    print(f"model calls per one-task run (keyword-routed):   {calls:.1f}   (goal <= 3)")
    print(f"framework overhead per model call, in-process:  {overhead:.2f} ms  (goal <= 10 ms)")
    model = FakeModelServer(auto=True).start()
    try:
        figs = http_figures(model, "auto")
        base = http_figures(model, "litellm", starts=0)
    finally:
        model.stop()
    print(
        f"server start -> healthy (median of 3):          {figs['healthy_s']:.2f} s   (goal <= 2 s)"
    )
    print(
        "POST -> first event (median of 20):             "
        f"{figs['first_event_ms']:.1f} ms  (goal <= 50 ms)"
    )
    print(
        f"whole run over HTTP, streaming (median):        {figs['run_ms']:.1f} ms "
        f"for {figs['calls_per_run_http']:.1f} model calls "
        f"= {figs['per_call_ms_http']:.1f} ms per call incl. HTTP "
        f"(litellm: {base['run_ms']:.1f} ms, {base['run_ms'] / figs['run_ms']:.2f}x)"
    )
    print(
        "runs per second, 100 runs at 20 concurrent:     "
        f"{figs['runs_per_s_20']:.1f}   (goal >= 20; litellm: {base['runs_per_s_20']:.1f}, "
        f"{figs['runs_per_s_20'] / base['runs_per_s_20']:.2f}x)"
    )


if __name__ == "__main__":
    main()
