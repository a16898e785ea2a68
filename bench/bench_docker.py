"""Docker runtime figures: cold start to the first action result, and per-exec overhead.

    uv run python bench/bench_docker.py [--rounds N] [--execs N]

Goals: cold start <= 1 s, per-exec overhead <= 60 ms. Prints figures; asserts nothing.
Skips (exit 0) when no engine answers or the sandbox image is missing.
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
from backend.config import Settings
from backend.runtime.docker import DockerRuntime
from backend.runtime.local import LocalRuntime

TRUE = Action("terminal_run", {"command": "true"})


def ms(values: list[float]) -> str:
    values = sorted(values)
    p90 = values[min(len(values) - 1, int(len(values) * 0.9))]
    return (
        f"median {statistics.median(values) * 1000:7.1f} ms   p90 {p90 * 1000:7.1f} ms   "
        f"min {values[0] * 1000:7.1f} ms   (n={len(values)})"
    )


async def main(rounds: int, execs: int) -> int:
    with tempfile.TemporaryDirectory(prefix="planact-bench-") as tmp:
        root = Path(tmp) / "workspace"
        settings = Settings(_env_file=None, workspace_dir=root)  # type: ignore[call-arg]

        probe = DockerRuntime(settings)
        first = await probe.execute(TRUE, root / "probe")
        await probe.close()
        if not first.ok:
            print(f"skipped: {first.content}")
            return 0

        # cold: a new runtime (engine connection) and a new conversation (container)
        cold: list[float] = []
        for i in range(rounds):
            rt = DockerRuntime(settings)
            start = time.perf_counter()
            result = await rt.execute(TRUE, root / f"cold-{i}")
            cold.append(time.perf_counter() - start)
            assert result.ok, result.content
            await rt.close()

        # new conversation on a connected runtime (the usual case on a running server)
        rt = DockerRuntime(settings)
        await rt.execute(TRUE, root / "warmup")
        new_conv: list[float] = []
        for i in range(rounds):
            start = time.perf_counter()
            result = await rt.execute(TRUE, root / f"conv-{i}")
            new_conv.append(time.perf_counter() - start)
            assert result.ok, result.content

        # per exec in a running container
        ws = root / "warm"
        await rt.execute(TRUE, ws)
        warm: list[float] = []
        for _ in range(execs):
            start = time.perf_counter()
            result = await rt.execute(TRUE, ws)
            warm.append(time.perf_counter() - start)
            assert result.ok, result.content
        await rt.close()

        # the fallback: one docker exec per command (images without python3)
        rt = DockerRuntime(settings, runner=False)
        await rt.execute(TRUE, ws)
        per_exec: list[float] = []
        for _ in range(min(execs, 30)):
            start = time.perf_counter()
            result = await rt.execute(TRUE, ws)
            per_exec.append(time.perf_counter() - start)
            assert result.ok, result.content
        await rt.close()

        local = LocalRuntime(terminal_timeout=settings.terminal_timeout)
        local_times: list[float] = []
        for _ in range(execs):
            start = time.perf_counter()
            await local.execute(TRUE, root / "local")
            local_times.append(time.perf_counter() - start)

    print(f"image {settings.sandbox_image}")
    print(f"cold start, new runtime + container, to first result   {ms(cold)}   goal <= 1000 ms")
    print(f"new conversation container on a running server         {ms(new_conv)}")
    print(f"terminal_run `true` in a running container (docker)    {ms(warm)}   goal <= 60 ms")
    print(f"terminal_run `true`, one docker exec each (fallback)   {ms(per_exec)}")
    print(f"terminal_run `true` (local runtime, for comparison)    {ms(local_times)}")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--execs", type=int, default=50)
    args = parser.parse_args()
    sys.exit(asyncio.run(main(args.rounds, args.execs)))
