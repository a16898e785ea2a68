"""Runs that wait for a person: the approval round trip across replicas, and what 100
waiting runs hold. Real `planact serve` / `planact worker` processes on PostgreSQL, the fake
model over HTTP (in this process).

  BENCH_POSTGRES_URL=... uv run python bench/bench_waits.py [--approvals 100] [--waiting 100]

The database of BENCH_POSTGRES_URL (or TEST_POSTGRES_URL) is wiped. Prints figures; asserts nothing.

1. Approval round trip: two inline replicas A and B; runs with `"approval": "always"` whose
   every step is a command. Each approval message is answered by POST
   /api/agent/runs/{id}/approvals/{uuid}, alternately on the replica that parked the run
   ("same") and on the other one ("other", the figure; "same" is the baseline measured in
   the same run); the time is from the POST to the action's own `running` message read on
   the SSE stream of the replica the POST went to (the page of the person who clicked).
2. 100 waiting runs (EXECUTOR=queue, one `planact worker` with WORKER_CONCURRENCY=1): RSS
   of the serve and worker processes after 100 runs completed (the baseline) and after 100
   more parked on an approval; then a run that needs no approval goes on the 1-slot worker
   while the 100 wait (its time vs the same run before they parked); then the 100 are
   approved and complete.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.agent.scripts import finish, plan_reply, run  # noqa: E402
from tests.e2e.cluster import Worker, start_json  # noqa: E402
from tests.e2e.server import Process, Server, server_env  # noqa: E402
from tests.e2e.waiting import decide, pending  # noqa: E402
from tests.fakellm import FakeModelServer  # noqa: E402
from tests.pg import wipe  # noqa: E402
from tests.sse_client import iter_events  # noqa: E402

STEPS = 10  # approvals per run (one command each; under MAX_STEPS_PER_TASK)


def rss_mb(proc: Process) -> float:
    assert proc.proc is not None
    for line in Path(f"/proc/{proc.proc.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def cpu_seconds(proc: Process) -> float:
    """CPU (user + system) the process has used, not counting its children."""
    assert proc.proc is not None
    fields = Path(f"/proc/{proc.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


def summary(values: list[float]) -> str:
    return (
        f"p50 {statistics.median(values):.0f} ms, p90 {pct(values, 0.9):.0f} ms, "
        f"p99 {pct(values, 0.99):.0f} ms, max {max(values):.0f} ms (n={len(values)})"
    )


class Stream:
    """One replica's SSE stream of a run, read on a thread: (arrival, message) pairs."""

    def __init__(self, server: Server, run_id: str) -> None:
        self.seen: list[tuple[float, dict[str, Any]]] = []
        self.cond = threading.Condition()
        self.thread = threading.Thread(target=self._read, args=(server, run_id), daemon=True)
        self.thread.start()

    def _read(self, server: Server, run_id: str) -> None:
        with (
            httpx.Client(base_url=server.url, timeout=120) as c,
            c.stream("GET", f"/api/agent/runs/{run_id}/events") as resp,
        ):
            for ev in iter_events(resp.iter_lines()):
                if ev.event == "end":
                    return
                if ev.event == "message":
                    with self.cond:
                        self.seen.append((time.perf_counter(), ev.json))
                        self.cond.notify_all()

    def first(self, pred: Any, after: int, timeout: float = 60) -> tuple[float, dict[str, Any]]:
        """The first message at index >= ``after`` matching ``pred``, waited for."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for t, msg in self.seen[after:]:
                    if pred(msg):
                        return t, msg
                left = deadline - time.monotonic()
                if left <= 0:
                    raise SystemExit("the stream did not show the message in time")
                self.cond.wait(left)


def action_start_after(seq: int) -> Any:
    def pred(msg: dict[str, Any]) -> bool:
        return bool(
            msg["seq"] > seq
            and msg["status"] == "running"
            and msg["meta"]["action_type"] == "terminal_run"
        )

    return pred


def round_trips(
    tmp: Path, fake: FakeModelServer, url: str, runs: int
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    wipe(url)
    tmp.mkdir()
    env = server_env(tmp, fake.base_url, DATABASE_URL=url, EXECUTOR="inline")
    a, b = Server(tmp, env).start(60), Server(tmp, env).start(60)
    cpu0 = cpu_seconds(a) + cpu_seconds(b)
    times: dict[str, list[float]] = {"other": [], "same": []}
    answered: dict[str, list[float]] = {"other": [], "same": []}  # the POST's own time
    try:
        for r in range(runs):
            fake.script(
                {"stage": "planning", "content": plan_reply("Mark")},
                *[{"stage": "thinking", "content": run(f"echo {r}-{i}")} for i in range(STEPS)],
                {"stage": "thinking", "content": finish("marked")},
            )
            ids = start_json(a, {"goal": "mark it", "approval": "always"}).json()
            rid, cid = ids["run_id"], ids["conversation_id"]
            streams = {a: Stream(a, rid), b: Stream(b, rid)}
            parked_on = a
            for i in range(STEPS):
                asked = pending(a, cid)
                case = "other" if (r * STEPS + i) % 2 == 0 else "same"
                to = parked_on if case == "same" else (b if parked_on is a else a)
                stream = streams[to]
                mark = len(stream.seen)
                began = time.perf_counter()
                got = decide(to, rid, asked["uuid"], {"decision": "approve"})
                answered[case].append((time.perf_counter() - began) * 1000)
                if got.status_code != 200:
                    raise SystemExit(f"approval answered {got.status_code}: {got.text}")
                seen_at, _ = stream.first(action_start_after(asked["seq"]), mark)
                times[case].append((seen_at - began) * 1000)
                parked_on = to
            for s in streams.values():
                s.thread.join(60)
            print(
                f"  run {r + 1}: other p50 {statistics.median(times['other']):.0f} ms, "
                f"same p50 {statistics.median(times['same']):.0f} ms so far",
                flush=True,
            )
        cpu = (cpu_seconds(a) + cpu_seconds(b) - cpu0) * 1000 / (runs * STEPS)
        print(
            f"  both servers' CPU per approval step (model call, approval message, POST, "
            f"resume, command): {cpu:.1f} ms"
        )
    finally:
        a.stop()
        b.stop()
    return times, answered


def statuses(server: Server) -> dict[str, int]:
    out: dict[str, int] = {}
    with server.client() as c:
        for conv in c.get("/api/conversations").json():
            out[conv["status"]] = out.get(conv["status"], 0) + 1
    return out


def wait_status(server: Server, status: str, count: int, timeout: float = 600) -> float:
    began = time.monotonic()
    while time.monotonic() - began < timeout:
        if statuses(server).get(status, 0) >= count:
            return time.monotonic() - began
        time.sleep(0.2)
    raise SystemExit(f"not {count} runs {status} within {timeout} s: {statuses(server)}")


def one_run_seconds(server: Server) -> float:
    began = time.monotonic()
    with server.client() as c, c.stream("POST", "/api/agent/run", json={"goal": "write code"}) as r:
        tail = ""
        for line in r.iter_lines():
            tail = line if line.startswith("data:") else tail
    if '"completed"' not in tail:
        raise SystemExit(f"the run did not complete: {tail}")
    return time.monotonic() - began


def waiting_runs(tmp: Path, fake: FakeModelServer, url: str, count: int) -> None:
    wipe(url)
    fake.model.auto = True  # planning: one task; thinking: write a file and finish
    env = server_env(tmp, fake.base_url, DATABASE_URL=url, EXECUTOR="queue")
    server = Server(tmp, env).start(60)
    worker = Worker(tmp, {**env, "WORKER_CONCURRENCY": "1"}, "one-slot").start()
    try:
        before = one_run_seconds(server)  # warm: every module imported in both processes
        rss0 = {"serve": rss_mb(server), "worker": rss_mb(worker)}
        for _ in range(count):
            start_json(server, {"goal": "write code", "approval": "never"})
        wait_status(server, "completed", count + 1)
        rss1 = {"serve": rss_mb(server), "worker": rss_mb(worker)}
        alone = statistics.median(one_run_seconds(server) for _ in range(3))
        for _ in range(count):
            start_json(server, {"goal": "write code", "approval": "always"})
        parked = wait_status(server, "waiting", count)
        rss2 = {"serve": rss_mb(server), "worker": rss_mb(worker)}
        beside = statistics.median(one_run_seconds(server) for _ in range(3))
        still = statuses(server).get("waiting", 0)
        approving = time.monotonic()
        with server.client() as c:
            convs = c.get("/api/conversations").json()
            owned = 0
            for conv in convs:
                if conv["status"] != "waiting":
                    continue
                detail = c.get(f"/api/conversations/{conv['conversation_id']}").json()
                owned += sum(1 for r in detail["runs"] if r["status"] == "waiting" and r["owner"])
                asked = pending(server, conv["conversation_id"])
                decide(server, detail["runs"][-1]["run_id"], asked["uuid"], {"decision": "approve"})
        wait_status(server, "completed", 2 * count + 7)
        approved = time.monotonic() - approving
        rss3 = {"serve": rss_mb(server), "worker": rss_mb(worker)}
    finally:
        worker.stop()
        server.stop()
    print(f"\n2. {count} waiting runs (EXECUTOR=queue, one worker with WORKER_CONCURRENCY=1)")
    print(f"  first run (warm-up): {before:.2f} s; {count} runs parked in {parked:.1f} s")
    for name in ("serve", "worker"):
        per_done = (rss1[name] - rss0[name]) * 1024 / count
        per_wait = (rss2[name] - rss1[name]) * 1024 / count
        print(
            f"  {name:6} RSS: {rss0[name]:.1f} MB warm, {rss1[name]:.1f} MB after {count} "
            f"completed runs ({per_done:+.1f} KB each, the baseline), {rss2[name]:.1f} MB "
            f"with {count} more waiting ({per_wait:+.1f} KB each), {rss3[name]:.1f} MB "
            "once they were approved and completed"
        )
    print(
        f"  waiting runs with an owner (a process holding them): {owned} of {still}; a run "
        f"needing no approval on the 1-slot worker while they wait: {beside:.2f} s "
        f"(before they parked: {alone:.2f} s, {beside / alone:.2f}x)"
    )
    print(f"  the {count} approved (one POST each, in turn) and completed in {approved:.1f} s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--approvals", type=int, default=100, help="approvals on each side")
    parser.add_argument("--waiting", type=int, default=100, help="runs left waiting")
    args = parser.parse_args()
    url = os.environ.get("BENCH_POSTGRES_URL") or os.environ.get("TEST_POSTGRES_URL", "")
    if not url.startswith("postgresql"):
        print("bench_waits: set BENCH_POSTGRES_URL (a database it may wipe); skipped")
        return 0
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the start")
    fake = FakeModelServer().start()
    try:
        with tempfile.TemporaryDirectory(prefix="bench-waits-") as tmp:
            runs = max(1, -(-2 * args.approvals // STEPS))
            times, answered = round_trips(Path(tmp) / "trips", fake, url, runs)
            print("\n1. approval round trip: POST on a replica -> the action's running message")
            print(f"  on the other replica: {summary(times['other'])}")
            print(f"  on the same replica (baseline): {summary(times['same'])}")
            print(f"  of which the POST's answer, other replica: {summary(answered['other'])}")
            ratio = statistics.median(times["other"]) / statistics.median(times["same"])
            print(f"  other / same, p50: {ratio:.2f}x; goal: p99 <= 300 ms")
        with tempfile.TemporaryDirectory(prefix="bench-waits-") as tmp:
            waiting_runs(Path(tmp), fake, url, args.waiting)
        print(f"load average {os.getloadavg()[0]:.1f} at the end")
    finally:
        fake.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
