"""Runtime figures: docker cold start and per-exec overhead, local command overhead, and
the cost of the race-free file actions (openat2 and the walk it falls back to).

    uv run python bench/bench_docker.py [--rounds N] [--execs N]

Goals: cold start <= 1 s, per-exec overhead <= 60 ms. Prints figures; asserts nothing.
The docker part is skipped when no engine answers or the sandbox image is missing.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from backend.actions.model import Action
from backend.actions.registry import run_action
from backend.config import Settings
from backend.runtime import confined
from backend.runtime.docker import DockerRuntime
from backend.runtime.local import LocalRuntime

TRUE = Action("terminal_run", {"command": "true"})
WRITE = Action("write_code", {"path": "src/deep/f.py", "content": "print('x')\n" * 100})
READ = Action("read_file", {"path": "src/deep/f.py"})


def ms(values: list[float]) -> str:
    values = sorted(values)
    p90 = values[min(len(values) - 1, int(len(values) * 0.9))]
    return (
        f"median {statistics.median(values) * 1000:7.1f} ms   p90 {p90 * 1000:7.1f} ms   "
        f"min {values[0] * 1000:7.1f} ms   (n={len(values)})"
    )


async def timed(rt: LocalRuntime | DockerRuntime, action: Action, ws: Path, n: int) -> list[float]:
    times: list[float] = []
    for _ in range(n):
        start = time.perf_counter()
        result = await run_action(rt, action, ws)
        times.append(time.perf_counter() - start)
        assert result.ok, result.content
    return times


async def local_figures(root: Path, settings: Settings, execs: int) -> None:
    local = LocalRuntime(terminal_timeout=settings.terminal_timeout)
    ws = root / "local"
    plain = await timed(local, TRUE, ws, execs)
    print(f"terminal_run `true` (local runtime)                     {ms(plain)}")
    many = root / "many"
    for i in range(2000):
        (many / f"d{i // 100}").mkdir(parents=True, exist_ok=True)
        (many / f"d{i // 100}" / f"f{i}.txt").write_text("x")
    crowded = await timed(local, TRUE, many, execs)
    print(f"  the same in a workspace of 2,000 files (size check)   {ms(crowded)}")
    for mode, flag in (("openat2", None), ("walk", False)):
        confined.use_openat2(flag)
        w = await timed(local, WRITE, ws, execs * 4)
        r = await timed(local, READ, ws, execs * 4)
        print(f"write_code, 3 levels deep ({mode:7})                     {ms(w)}")
        print(f"read_file, 3 levels deep ({mode:7})                      {ms(r)}")
    confined.use_openat2(None)


async def main(rounds: int, execs: int) -> int:
    with tempfile.TemporaryDirectory(prefix="planact-bench-") as tmp:
        root = Path(tmp) / "workspace"
        settings = Settings(_env_file=None, workspace_dir=root)
        await local_figures(root, settings, execs)

        probe = DockerRuntime(settings)
        first = await run_action(probe, TRUE, root / "probe")
        await probe.close()
        if not first.ok:
            print(f"docker skipped: {first.content}")
            return 0

        # cold: a new runtime (engine connection) and a new conversation (container)
        cold: list[float] = []
        for i in range(rounds):
            rt = DockerRuntime(settings)
            start = time.perf_counter()
            result = await run_action(rt, TRUE, root / f"cold-{i}")
            cold.append(time.perf_counter() - start)
            assert result.ok, result.content
            await rt.close()

        # new conversation on a connected runtime (the usual case on a running server)
        rt = DockerRuntime(settings)
        await run_action(rt, TRUE, root / "warmup")
        new_conv: list[float] = []
        for i in range(rounds):
            start = time.perf_counter()
            result = await run_action(rt, TRUE, root / f"conv-{i}")
            new_conv.append(time.perf_counter() - start)
            assert result.ok, result.content

        # per exec in a running container
        ws = root / "warm"
        await run_action(rt, TRUE, ws)
        warm = await timed(rt, TRUE, ws, execs)
        escape = Action("terminal_run", {"command": "setsid sleep 100 & (sleep 100 &)"})
        leftovers = await timed(rt, escape, ws, max(5, execs // 5))
        await rt.close()

        # the fallback: one docker exec per command (images without python3)
        rt = DockerRuntime(settings, runner=False)
        await run_action(rt, TRUE, ws)
        per_exec = await timed(rt, TRUE, ws, min(execs, 30))
        await rt.close()

    print(f"image {settings.sandbox_image}")
    print(f"cold start, new runtime + container, to first result   {ms(cold)}   goal <= 1000 ms")
    print(f"new conversation container on a running server         {ms(new_conv)}")
    print(f"terminal_run `true` in a running container (docker)    {ms(warm)}   goal <= 60 ms")
    print(f"  a command leaving 2 escaped processes (killed)       {ms(leftovers)}")
    print(f"terminal_run `true`, one docker exec each (fallback)   {ms(per_exec)}")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--execs", type=int, default=50)
    args = parser.parse_args()
    sys.exit(asyncio.run(main(args.rounds, args.execs)))
