"""Runs across processes: delivery latency (LISTEN/NOTIFY vs the in-process bus),
stop latency across replicas, runs/s with two workers vs one, kill -9 -> run continued.

Needs PostgreSQL: BENCH_POSTGRES_URL (or TEST_POSTGRES_URL) names a database it may wipe.
Run: `uv run python bench/bench_runs.py`.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from backend.messages.message import Message
from backend.runs.notify import LocalNotifier, Notifier, PgNotifier
from backend.store.repo import Store
from tests.agent.scripts import finish, plan_reply, run
from tests.e2e.cluster import Worker
from tests.e2e.server import Server, server_env
from tests.fakellm import FakeModelServer
from tests.pg import wipe
from tests.sse_client import collect

GOAL = "write code"


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, round(p / 100 * (len(values) - 1)))]


async def delivery(store: Store, writer: Notifier, reader: Notifier, n: int = 300) -> list[float]:
    """Time from 'append the message' to 'the reader woke and read it from the store'."""
    cid = await store.create_conversation("1", "bench")
    rid = await store.start_run("1", cid, "g", "auto", "local", owner="bench")
    sub = reader.bus.subscribe(rid)
    lat: list[float] = []
    last = 0
    for i in range(n):
        msg = Message.build("x", str(i))
        msg.conversation_id, msg.run_id = cid, rid
        t0 = time.perf_counter()
        stored = await store.append_message(msg)
        writer.bus.publish(rid, stored)
        while True:
            await reader.bus.wait(rid, sub, 5)
            got = await store.messages(cid, run_id=rid, after=last)
            if got:
                last = got[-1].seq
                break
        lat.append((time.perf_counter() - t0) * 1000)
    await store.end_run(rid, "completed")
    return lat


async def delivery_figures(url: str) -> None:
    wipe(url)
    store = Store(url)
    store.migrate()
    local = LocalNotifier()
    inline = await delivery(store, local, local)
    w, r = PgNotifier(url, "w"), PgNotifier(url, "r")
    await w.start()
    await r.start()
    try:
        notify = await delivery(store, w, r)
    finally:
        await w.close()
        await r.close()
        await store.close()
    print(
        f"delivery, in-process bus (same process):      p50 {pct(inline, 50):6.2f} ms"
        f"   p99 {pct(inline, 99):6.2f} ms"
    )
    print(
        f"delivery, LISTEN/NOTIFY (other connection):   p50 {pct(notify, 50):6.2f} ms"
        f"   p99 {pct(notify, 99):6.2f} ms   (goal p99 <= 100 ms;"
        f" ratio p50 {pct(notify, 50) / pct(inline, 50):.1f}x)"
    )


def start_json(server: Server, cid: str | None = None) -> dict[str, str]:
    body: dict[str, str] = {"goal": GOAL}
    if cid:
        body["conversation_id"] = cid
    with server.client() as c:
        r = c.post("/api/agent/run", json=body, headers={"Accept": "application/json"})
        r.raise_for_status()
        out: dict[str, str] = r.json()
        return out


def stop_figures(url: str, model: FakeModelServer, tmp: Path) -> None:
    wipe(url)
    env = server_env(tmp, model.base_url, DATABASE_URL=url)
    a, b = Server(tmp, env).start(60), Server(tmp, env).start(60)
    took: list[float] = []
    try:
        for _ in range(10):
            model.model.reset()
            model.script(
                {"stage": "planning", "content": plan_reply("Wait")},
                {"stage": "thinking", "content": run("sleep 600") + finish("x")},
            )
            ids = start_json(a)
            rid, cid = ids["run_id"], ids["conversation_id"]
            with a.client() as c:
                while not any(
                    m["meta"]["action_type"] == "terminal_run"
                    for m in c.get(f"/api/conversations/{cid}/messages").json()
                ):
                    time.sleep(0.01)
            t0 = time.perf_counter()
            with b.client() as c:
                c.post(f"/api/agent/runs/{rid}/stop").raise_for_status()
            with a.client() as c, c.stream("GET", f"/api/agent/runs/{rid}/events") as resp:
                _, end = collect(resp.iter_lines())
            assert end is not None and end["status"] == "stopped"
            took.append((time.perf_counter() - t0) * 1000)
    finally:
        a.stop()
        b.stop()
    print(
        f"stop via the other replica -> stream ends:    p50 {pct(took, 50):6.0f} ms"
        f"   max {max(took):6.0f} ms   (goal <= 1000 ms)"
    )


async def _throughput(api: Server, runs: int) -> float:
    async with httpx.AsyncClient(base_url=api.url, timeout=300) as c:

        async def one() -> None:
            r = await c.post(
                "/api/agent/run", json={"goal": GOAL}, headers={"Accept": "application/json"}
            )
            r.raise_for_status()
            rid = r.json()["run_id"]
            async with c.stream("GET", f"/api/agent/runs/{rid}/events") as resp:
                async for line in resp.aiter_lines():
                    if line.startswith("event: end"):
                        break

        t0 = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(runs)))
        return runs / (time.perf_counter() - t0)


def worker_figures(url: str, model: FakeModelServer, tmp: Path) -> None:
    wipe(url)
    model.model.reset()
    model.model.auto = True
    env = server_env(tmp, model.base_url, DATABASE_URL=url, EXECUTOR="queue", LEASE_SECONDS="6")
    api = Server(tmp, env).start(60)
    workers = [Worker(tmp, env, "b1").start()]
    try:
        asyncio.run(_throughput(api, 4))  # warm up
        one = asyncio.run(_throughput(api, 40))
        workers.append(Worker(tmp, env, "b2").start())
        asyncio.run(_throughput(api, 4))
        two = asyncio.run(_throughput(api, 40))
        print(
            f"runs/s, 1 worker:                             {one:6.1f}\n"
            f"runs/s, 2 workers:                            {two:6.1f}   "
            f"(ratio {two / one:.2f}x; zero-latency model, 2 cores shared by everything)"
        )
        # kill -9 the worker holding a held run: the other worker continues it
        model.model.auto = False
        model.model.reset()
        model.script(
            {"stage": "planning", "content": plan_reply("Hang")},
            {"stage": "thinking", "content": finish("x"), "hold": "hang"},
            {"stage": "thinking", "content": finish("y")},  # the call in flight, made again
        )
        ids = start_json(api)
        with api.client() as c:
            while not c.get(f"/api/conversations/{ids['conversation_id']}").json()["runs"][-1][
                "owner"
            ] or not any(
                m["meta"]["action_type"] == "task"
                for m in c.get(f"/api/conversations/{ids['conversation_id']}/messages").json()
            ):
                time.sleep(0.01)
            owner = c.get(f"/api/conversations/{ids['conversation_id']}").json()["runs"][-1][
                "owner"
            ]
        victim = next(w for w in workers if w.proc and str(w.proc.pid) in owner.split("-"))
        victim.kill9()
        t0 = time.perf_counter()
        with api.client() as c, c.stream("GET", f"/api/agent/runs/{ids['run_id']}/events") as r:
            _, end = collect(r.iter_lines())
        took = time.perf_counter() - t0
        model.release("hang")
        assert end is not None and end["status"] == "completed"
        print(
            f"kill -9 of a worker -> run completed elsewhere: {took:6.2f} s   "
            f"(one host: the dead PID is seen at the next recovery pass, a third of "
            f"LEASE_SECONDS=6; another host: the lease + up to a third of it)"
        )
    finally:
        for w in workers:
            w.stop()
        api.stop()


def main() -> int:
    url = os.environ.get("BENCH_POSTGRES_URL") or os.environ.get("TEST_POSTGRES_URL")
    if not url:
        print("bench_runs: set BENCH_POSTGRES_URL (a database it may wipe); skipped")
        return 0
    asyncio.run(delivery_figures(url))
    model = FakeModelServer().start()
    tmp = Path(tempfile.mkdtemp(prefix="planact-bench-runs-"))
    try:
        stop_figures(url, model, tmp)
        worker_figures(url, model, tmp)
    finally:
        model.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
