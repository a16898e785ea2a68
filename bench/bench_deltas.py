"""Live delta delivery delay: from a command printing a line to a reader receiving it.

  uv run python bench/bench_deltas.py [--lines 400] [--gap 0.01] [--readers 1]

The real `planact serve` (local runtime, SQLite) runs a command that prints LINES lines,
each with the time it was printed, GAP seconds apart. Readers follow the run's stream;
for every line received in a `delta` event the delay is `now - printed`. The baseline,
measured in the same run: the delay of the stored message (from the command's last line to
the final `terminal_run` message reaching the reader), the path every reader had before.
Deltas are coalesced to about 20 a second per message, so up to ~50 ms of the delay is
by design.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from tests.agent.scripts import finish, plan_reply, run
from tests.e2e.server import Server, server_env
from tests.fakellm import FakeModelServer
from tests.sse_client import iter_events

PRINTER = (
    'python3 -u -c "import time,sys\nfor i in range({n}):\n'
    "    print('%.6f' % time.time(), flush=True); time.sleep({gap})\""
)


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, round(p / 100 * (len(s) - 1)))]


def follow(server: Server, rid: str, out: dict[str, Any]) -> None:
    delays: list[float] = []
    partial = ""
    last_printed = 0.0
    deltas = 0
    with server.client() as c, c.stream("GET", f"/api/agent/runs/{rid}/events") as resp:
        for ev in iter_events(resp.iter_lines()):
            now = time.time()
            if ev.event == "end":
                break
            data = ev.json
            if ev.event == "delta" and data.get("stream") == "stdout":
                deltas += 1
                text = partial + data["text"]
                *lines, partial = text.split("\n")
                for line in lines:
                    if line.strip():
                        printed = float(line)
                        last_printed = max(last_printed, printed)
                        delays.append(now - printed)
            elif (
                ev.event == "message"
                and data["meta"]["action_type"] == "terminal_run"
                and data["status"] != "running"
            ):
                lines = [x for x in data["content"].split("\n") if x[:1].isdigit() and "." in x]
                out["stored_delay"] = now - float(lines[-1]) if lines else float("nan")
    out["delays"] = delays
    out["deltas"] = deltas


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=400)
    ap.add_argument("--gap", type=float, default=0.01)
    ap.add_argument("--readers", type=int, default=1)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="planact-bench-deltas-"))
    fake = FakeModelServer().start()
    command = PRINTER.format(n=args.lines, gap=args.gap)
    fake.script(
        {"stage": "planning", "content": plan_reply("Print")},
        {"stage": "thinking", "content": run(command) + finish("printed")},
    )
    server = Server(tmp, server_env(tmp, fake.base_url, LOG_LEVEL="WARNING")).start()
    try:
        with server.client() as c:
            r = c.post(
                "/api/agent/run",
                json={"goal": "print lines", "mode": "agent"},
                headers={"Accept": "application/json"},
            )
            rid = r.json()["run_id"]
        results: list[dict[str, Any]] = [{} for _ in range(args.readers)]
        threads = [
            threading.Thread(target=follow, args=(server, rid, results[i]))
            for i in range(args.readers)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
    finally:
        server.stop()
        fake.stop()
    delays = [d * 1000 for r in results for d in r.get("delays", [])]
    stored = [r["stored_delay"] * 1000 for r in results if "stored_delay" in r]
    if not delays:
        print("no deltas received")
        return 1
    lines_seen = len(delays) // max(1, args.readers)
    deltas = sum(r.get("deltas", 0) for r in results) / max(1, args.readers)
    duration = args.lines * args.gap
    print(
        json.dumps(
            {
                "lines": args.lines,
                "gap_ms": args.gap * 1000,
                "readers": args.readers,
                "lines_seen_per_reader": lines_seen,
                "deltas_per_reader": deltas,
                "deltas_per_second": round(deltas / duration, 1),
            }
        )
    )
    print(
        f"delta delay ms: p50 {statistics.median(delays):.1f}  p95 {pct(delays, 95):.1f}  "
        f"p99 {pct(delays, 99):.1f}  max {max(delays):.1f}"
    )
    if stored:
        base = statistics.median(stored)
        print(
            f"baseline (stored final message after the last line) ms: {base:.1f}; "
            f"delta p99 / baseline = {pct(delays, 99) / base:.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
