"""The sandbox limits while a command runs (docs/security.md): what they cost per
`terminal_run`, and how soon a command that crosses the workspace budget is stopped.

    uv run python bench/bench_limits.py [--execs N] [--stops N] [--base REV]

Cost: the same commands with the limits on (today's runtimes) and off (the code path before
them: the reaper of ``--base``, default the merge base with main, taken from git; after
the merge pass ``--base dfee5d0``, the last commit before the limits; no
workspace watcher, no control groups, no capped /tmp), interleaved in one run so that machine
load hits both alike. Wall time (median of the paired differences) and CPU time: the
command's processes (children of this process) and this process's own (the watcher's
samples). Goal: <= 10 ms more per command.

Stop: a command writes 1 MB files at a steady pace into a 50 MB workspace; the moment it
crossed the budget is the modification time of the file that took the workspace past it,
the stop is when the result came back. Goal: <= 1 s after crossing.

Local (bubblewrap) and docker; each part is skipped when it cannot run here. Prints
figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from backend.actions.model import Action
from backend.actions.registry import run_action
from backend.config import Settings
from backend.runtime import confined
from backend.runtime.base import BaseRuntime, CommandOutput, OutputCallback
from backend.runtime.bwrap import Bubblewrap
from backend.runtime.limits import MB, SandboxLimits
from backend.runtime.limits.budget import COST_SHARE, INTERVAL
from backend.runtime.local import LocalRuntime
from backend.runtime.sandboxing import sandbox_cgroups

GOAL_MS = 10.0
STOP_GOAL_S = 1.0
COMMANDS = {"`true`": "true", "`python3 -c pass`": "python3 -c pass"}
# 1 MB every 20 ms (about 50 MB/s) until stopped, 120 MB at most
WRITER = (
    "i=0; while [ $i -lt 120 ]; do i=$((i+1)); head -c 1M /dev/zero > f$i.bin; sleep 0.02; done"
)


def ms(values: list[float]) -> str:
    values = sorted(values)
    p90 = values[min(len(values) - 1, int(len(values) * 0.9))]
    return f"median {statistics.median(values) * 1000:6.1f} ms  p90 {p90 * 1000:6.1f} ms"


def cpu_now() -> tuple[float, float]:
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    me = resource.getrusage(resource.RUSAGE_SELF)
    return kids.ru_utime + kids.ru_stime, me.ru_utime + me.ru_stime


class Timing:
    def __init__(self) -> None:
        self.wall: list[float] = []
        self.kids: list[float] = []
        self.own: list[float] = []


async def once(rt: BaseRuntime, command: str, ws: Path, into: Timing) -> None:
    start, (kids, own) = time.perf_counter(), cpu_now()
    result = await run_action(rt, Action("terminal_run", {"command": command}), ws)
    into.wall.append(time.perf_counter() - start)
    kids_after, own_after = cpu_now()
    into.kids.append(kids_after - kids)
    into.own.append(own_after - own)
    assert result.ok, result.content


def base_reaper(rev: str | None, into: Path) -> Path:
    """The reaper before the limits, from git (today's when git cannot give it)."""
    try:
        if rev is None:
            rev = subprocess.run(
                ["git", "merge-base", "HEAD", "main"], capture_output=True, text=True, check=True
            ).stdout.strip()
        text = subprocess.run(
            ["git", "show", f"{rev}:backend/runtime/reaper.py"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        print(f"(no reaper of the code before from git: {exc}; today's reaper for both)")
        return Path(LocalRuntime.reaper)
    if "--rlimit" in text:
        print(f"(the reaper of {rev} already has the limits: pass --base REV of the code before)")
    path = into / "reaper_base.py"
    path.write_text(text)
    return path


class LocalWithout(LocalRuntime):
    """The local runtime as it ran before the limits: no watcher, no limit options."""

    async def _run_command(
        self, command: str, workspace: Path, cwd: str, on_output: OutputCallback | None = None
    ) -> CommandOutput:
        return await self._run_in_sandbox(command, workspace, cwd, on_output)

    def _limit_args(self, workspace: Path) -> list[str]:
        return []


async def paired(label: str, off: BaseRuntime, on: BaseRuntime, ws: Path, execs: int) -> float:
    worst = 0.0
    for name, command in COMMANDS.items():
        a, b = Timing(), Timing()
        await once(off, command, ws, Timing())  # warm-up
        await once(on, command, ws, Timing())
        for _ in range(execs):
            await once(off, command, ws, a)
            await once(on, command, ws, b)
        added = statistics.median(y - x for x, y in zip(a.wall, b.wall, strict=True)) * 1000
        worst = max(worst, added)
        kids_a, kids_b = statistics.mean(a.kids) * 1000, statistics.mean(b.kids) * 1000
        own_a, own_b = statistics.mean(a.own) * 1000, statistics.mean(b.own) * 1000
        print(f"terminal_run {name} ({label})")
        print(f"  limits off   {ms(a.wall)}   CPU command {kids_a:5.1f} ms  server {own_a:5.1f} ms")
        print(f"  limits on    {ms(b.wall)}   CPU command {kids_b:5.1f} ms  server {own_b:5.1f} ms")
        print(
            f"  added        {added:6.1f} ms wall (median of paired differences), CPU "
            f"{kids_b - kids_a:+.1f} ms command, {own_b - own_a:+.1f} ms server   "
            f"goal <= {GOAL_MS:g} ms"
        )
    return worst


async def stops(label: str, rt: BaseRuntime, root: Path, rounds: int) -> None:
    """Seconds from crossing the 50 MB budget to the result; MB past the budget."""
    late: list[float] = []
    past: list[float] = []
    for n in range(rounds):
        ws = root / f"stop-{label}-{n}"
        ws.mkdir(parents=True)
        result = await run_action(rt, Action("terminal_run", {"command": WRITER}), ws)
        returned = time.time()
        assert result.content.startswith("Stopped:"), result.content
        files = sorted(ws.glob("f*.bin"), key=lambda p: p.stat().st_mtime_ns)
        total, crossed = 0, None
        for path in files:
            total += path.stat().st_size
            if crossed is None and total > 50 * MB:
                crossed = path.stat().st_mtime_ns / 1e9
        assert crossed is not None
        late.append(returned - crossed)
        past.append(confined.usage(ws) / MB - 50)
        shutil.rmtree(ws)
    print(
        f"stop after crossing 50 MB ({label}, ~50 MB/s in 1 MB files, n={rounds}): median "
        f"{statistics.median(late) * 1000:.0f} ms, max {max(late) * 1000:.0f} ms "
        f"(goal <= {STOP_GOAL_S * 1000:.0f} ms); past the budget median "
        f"{statistics.median(past):.0f} MB, max {max(past):.0f} MB"
    )


def watcher_cost(root: Path) -> None:
    for count in (100, 2_000, 20_000):
        ws = root / f"files-{count}"
        for i in range(count):
            (ws / f"d{i // 200}").mkdir(parents=True, exist_ok=True)
            (ws / f"d{i // 200}" / f"f{i}.txt").write_text("x")
        samples = []
        for _ in range(5):
            start = time.perf_counter()
            confined.usage(ws)
            samples.append(time.perf_counter() - start)
        cost = statistics.median(samples)
        every = max(INTERVAL, cost * COST_SHARE)
        print(
            f"watcher: one sample of a workspace of {count:>6,} files {cost * 1000:6.1f} ms "
            f"-> sampled every {every * 1000:.0f} ms"
        )
        shutil.rmtree(ws)


async def local_part(root: Path, settings: Settings, args: Any) -> None:
    path = shutil.which("bwrap")
    if path is None or Bubblewrap(path).probe() is not None:
        print("local: skipped (bubblewrap missing or not working here)")
        return
    limits = SandboxLimits.from_settings(settings)
    cgroups = sandbox_cgroups(limits)
    print(
        "local under bubblewrap: memory/pids/CPU by "
        + ("cgroup v1 groups per conversation" if cgroups else "rlimits (no cgroups here)")
    )
    off = LocalWithout(
        terminal_timeout=settings.terminal_timeout, sandbox=Bubblewrap(path), offered=True
    )
    off.reaper = str(base_reaper(args.base, root))
    on = LocalRuntime(
        terminal_timeout=settings.terminal_timeout,
        workspace_max_mb=settings.workspace_max_mb,
        sandbox=Bubblewrap(path, tmp_size=limits.tmp),
        limits=limits,
        cgroups=cgroups,
    )
    worst = await paired("local, bubblewrap", off, on, root / "local", args.execs)
    print(f"  worst added per command (local): {worst:.1f} ms (goal <= {GOAL_MS:g} ms)")
    budget = LocalRuntime(
        terminal_timeout=settings.terminal_timeout,
        workspace_max_mb=50,
        sandbox=Bubblewrap(path, tmp_size=limits.tmp),
        limits=limits,
        cgroups=cgroups,
    )
    await stops("local, bubblewrap", budget, root, args.stops)
    for rt in (off, on, budget):
        await rt.close()


class DockerWithout:
    """The docker runtime as it ran before the limits: no watcher."""

    @staticmethod
    def make(settings: Settings) -> BaseRuntime:
        from backend.runtime.docker import DockerRuntime

        class Without(DockerRuntime):
            async def _run_command(
                self,
                command: str,
                workspace: Path,
                cwd: str,
                on_output: OutputCallback | None = None,
            ) -> CommandOutput:
                return await self._run_in_sandbox(command, workspace, cwd, on_output)

        return Without(settings)


async def docker_part(root: Path, settings: Settings, args: Any) -> None:
    from backend.runtime.docker import DockerRuntime

    probe = DockerRuntime(settings)
    first = await run_action(probe, Action("terminal_run", {"command": "true"}), root / "p")
    await probe.close()
    if not first.ok:
        print(f"docker: skipped ({first.content})")
        return
    off, on = DockerWithout.make(settings), DockerRuntime(settings)
    worst = await paired("docker", off, on, root / "docker", args.execs)
    print(f"  worst added per command (docker): {worst:.1f} ms (goal <= {GOAL_MS:g} ms)")
    budget = DockerRuntime(settings.model_copy(update={"workspace_max_mb": 50}))
    await stops("docker", budget, root, args.stops)
    for rt in (off, on, budget):
        await rt.close()


async def main(args: Any) -> int:
    with tempfile.TemporaryDirectory(prefix="planact-bench-") as tmp:
        root = Path(tmp) / "workspace"
        root.mkdir()
        settings = Settings(_env_file=None, workspace_dir=root)
        watcher_cost(root)
        await local_part(root, settings, args)
        await docker_part(root, settings, args)
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--execs", type=int, default=30)
    parser.add_argument("--stops", type=int, default=5)
    parser.add_argument("--base", default=None, help="git revision of the code before")
    sys.exit(asyncio.run(main(parser.parse_args())))
