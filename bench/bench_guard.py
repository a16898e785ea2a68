"""The run's stop-checked runtime, forwarding generically (backend/runs/stop_checked.py) against the
hand-written forwarder it replaced (from git, the merge base with main), in the same run:
`uv run python bench/bench_guard.py`. Prints, never asserts."""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from backend.agent.control import RunControl
from backend.runs.stop_checked import StopCheckedRuntime
from backend.runtime.local import LocalRuntime

BASELINE = "49030bf"  # the hand-written forwarder (Protocol, BaseRuntime and guard edited)
OPERATIONS = 2000
LOOKUPS = 200_000


def hand_written() -> Any:
    src = subprocess.run(
        ["git", "show", f"{BASELINE}:backend/runs/stop_checked.py"],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parent.parent,
    ).stdout
    module = types.ModuleType("hand_written_guard")
    exec(compile(src, "hand_written_guard.py", "exec"), module.__dict__)
    return module.StopCheckedRuntime


async def measure(cls: Any, workspace: Path) -> tuple[float, float]:
    """(µs per read_file through it, ns per attribute lookup)."""
    runtime = cls(LocalRuntime(), RunControl("bench"))
    start = time.perf_counter()
    for _ in range(OPERATIONS):
        await runtime.read_file(workspace, "missing.txt")
    per_op = (time.perf_counter() - start) / OPERATIONS * 1e6
    start = time.perf_counter()
    for _ in range(LOOKUPS):
        runtime.read_file  # noqa: B018
    per_lookup = (time.perf_counter() - start) / LOOKUPS * 1e9
    return per_op, per_lookup


async def main() -> None:
    old = hand_written()
    with tempfile.TemporaryDirectory() as tmp:
        results: dict[str, list[tuple[float, float]]] = {"hand-written": [], "generic": []}
        for _ in range(5):  # alternated: the load of the machine hits both alike
            results["hand-written"].append(await measure(old, Path(tmp)))
            results["generic"].append(await measure(StopCheckedRuntime, Path(tmp)))
    base = statistics.median(op for op, _ in results["hand-written"])
    for name, rows in results.items():
        op = statistics.median(r[0] for r in rows)
        lookup = statistics.median(r[1] for r in rows)
        print(
            f"{name:>12}: read_file (a missing file) {op:7.1f} µs/op ({op / base:.2f}x), "
            f"attribute lookup {lookup:5.0f} ns"
        )


if __name__ == "__main__":
    asyncio.run(main())
