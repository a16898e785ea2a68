"""The cost of bubblewrap per command: the local runtime with and without its sandbox, side
by side in the same run (interleaved, so that machine load hits both alike).

    uv run python bench/bench_bwrap.py [--execs N]

Goal: the sandbox adds <= 15 ms per command (median of the paired differences). Prints
figures; asserts nothing. Skipped when bubblewrap is missing or does not work here.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from backend.actions.model import Action
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


async def once(rt: LocalRuntime, command: str, ws: Path) -> float:
    start = time.perf_counter()
    result = await rt.execute(Action("terminal_run", {"command": command}), ws)
    elapsed = time.perf_counter() - start
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
    print(
        f"bubblewrap {path}; start-up probe (list /etc + one sandboxed command) {probe_s * 1000:.0f} ms"
    )
    print(f"/etc entries hidden from commands: {len(hidden_entries())}")
    worst = 0.0
    with tempfile.TemporaryDirectory(prefix="planact-bench-") as tmp:
        ws = Path(tmp) / "ws"
        for label, command in COMMANDS.items():
            for rt in (plain, boxed):  # warm-up
                await once(rt, command, ws)
            a: list[float] = []
            b: list[float] = []
            for _ in range(execs):
                a.append(await once(plain, command, ws))
                b.append(await once(boxed, command, ws))
            added = statistics.median(y - x for x, y in zip(a, b, strict=True)) * 1000
            worst = max(worst, added)
            print(f"terminal_run {label}")
            print(f"  local, unsandboxed   {ms(a)}")
            print(f"  local, bubblewrap    {ms(b)}")
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
