"""The cost of bubblewrap per command: the local runtime with and without its sandbox, side
by side in the same run (interleaved, so that machine load hits both alike).

    uv run python bench/bench_bwrap.py [--execs N]

Goal: the sandbox adds <= 15 ms per command (median of the paired differences). Also
prints the CPU time the command's processes used (user + system, children of this process),
which machine load does not inflate as it does wall time. Prints figures; asserts nothing.
Skipped when bubblewrap is missing or does not work here.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from backend.actions.model import Action
from backend.actions.registry import run_action
from backend.runtime.bwrap import Bubblewrap, hidden_entries
from backend.runtime.local import LocalRuntime

COMMANDS = {
    "`true`": "true",
    "`python3 -c pass`": "python3 -c pass",
    "`sleep 300 &` (a survivor killed)": "sleep 300 >/dev/null 2>&1 &",
}
GOAL_MS = 15.0


def ms(values: list[float]) -> str:
    values = sorted(values)
    p90 = values[min(len(values) - 1, int(len(values) * 0.9))]
    return f"median {statistics.median(values) * 1000:6.1f} ms  p90 {p90 * 1000:6.1f} ms"


def child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


async def once(rt: LocalRuntime, command: str, ws: Path, cpu: list[float]) -> float:
    start, start_cpu = time.perf_counter(), child_cpu()
    result = await run_action(rt, Action("terminal_run", {"command": command}), ws)
    elapsed = time.perf_counter() - start
    cpu.append(child_cpu() - start_cpu)
    assert result.ok, result.content
    return elapsed


async def main(execs: int) -> int:
    path = shutil.which("bwrap")
    if path is None:
        print("skipped: bubblewrap is not installed (apt-get install bubblewrap)")
        return 0
    start = time.perf_counter()
    sandbox = Bubblewrap(path)
    problem = sandbox.probe()
    probe_s = time.perf_counter() - start
    if problem is not None:
        print(f"skipped: bubblewrap does not work here: {problem}")
        return 0
    plain = LocalRuntime()
    boxed = LocalRuntime(sandbox=sandbox)
    print(f"bubblewrap {path}; start-up probe (list /etc, one command) {probe_s * 1000:.0f} ms")
    print(f"/etc entries hidden from commands: {len(hidden_entries())}")
    worst = 0.0
    with tempfile.TemporaryDirectory(prefix="planact-bench-") as tmp:
        ws = Path(tmp) / "ws"
        for label, command in COMMANDS.items():
            for rt in (plain, boxed):  # warm-up
                await once(rt, command, ws, [])
            a: list[float] = []
            b: list[float] = []
            a_cpu: list[float] = []
            b_cpu: list[float] = []
            for _ in range(execs):
                a.append(await once(plain, command, ws, a_cpu))
                b.append(await once(boxed, command, ws, b_cpu))
            added = statistics.median(y - x for x, y in zip(a, b, strict=True)) * 1000
            worst = max(worst, added)
            print(f"terminal_run {label}")
            cpu_a, cpu_b = statistics.mean(a_cpu) * 1000, statistics.mean(b_cpu) * 1000
            print(f"  local, unsandboxed   {ms(a)}   CPU {cpu_a:5.1f} ms")
            print(f"  local, bubblewrap    {ms(b)}   CPU {cpu_b:5.1f} ms (+{cpu_b - cpu_a:.1f})")
            print(
                f"  added by bubblewrap  {added:6.1f} ms median of paired differences "
                f"({statistics.median(b) / statistics.median(a):.2f}x)   goal <= {GOAL_MS:g} ms"
            )
    print(f"worst added cost per command: {worst:.1f} ms (goal <= {GOAL_MS:g} ms)")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--execs", type=int, default=40)
    args = parser.parse_args()
    sys.exit(asyncio.run(main(args.execs)))
