"""What checkpoints cost: a 200 MB, 2,000-file workspace (100 KB of random bytes each), the
real `git` program and the store on SQLite, in process (backend/checkpoints).

  uv run python bench/bench_checkpoints.py [--files 2000] [--kb 100] [--rounds 20]

Prints, each with its baseline measured in the same run:

- the first checkpoint (every file stored once), against copying the workspace
  (``shutil.copytree``, what a checkpoint by copy would cost every time);
- from a one-file action's result to its checkpoint being listed (``Checkpoints.take`` then
  ``GET …/checkpoints``' read), median and p95 over the rounds, against the scan of the
  workspace every task's prompt already makes (``backend.workspace.scan``); goal ≤ 50 ms;
- the bytes each of those checkpoints added on disk against the bytes that changed; goal
  ≤ 1.5x + 64 KiB;
- the CPU (this process and its git commands) each of those checkpoints took;
- a rewind across one changed file, and a fork (the whole workspace checked out into a new
  conversation), against ``shutil.copytree``; goal ≤ 1 s.

Asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from backend.checkpoints import Checkpoints  # noqa: E402
from backend.store.repo import Store  # noqa: E402
from backend.workspace import scan  # noqa: E402
from tests.migrated import place_migrated  # noqa: E402


def cpu() -> float:
    """CPU seconds of this process and its finished children (the git commands)."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def fill(ws: Path, files: int, size: int) -> None:
    for i in range(files):
        folder = ws / f"dir{i % 40:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"file{i:05d}.bin").write_bytes(os.urandom(size))


async def bench(files: int, kb: int, rounds: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-checkpoints-") as tmp_name:
        tmp = Path(tmp_name)
        place_migrated(tmp / "db.sqlite")
        store = Store(f"sqlite:///{tmp}/db.sqlite")
        cid = await store.create_conversation("1", "bench")
        ws = tmp / "workspace" / "user_1" / f"Conversation_{cid}"
        fill(ws, files, kb * 1024)
        total = sum(p.stat().st_size for p in ws.rglob("*") if p.is_file())
        print(f"workspace: {files} files, {total / 2**20:.0f} MB")
        service = Checkpoints(tmp / "workspace" / ".checkpoints", store, max_mb=4096)
        repo = service.repo("1", cid, ws)

        t = time.perf_counter()
        await service.take(repo, cid, "r", 1, "first")
        first = time.perf_counter() - t
        t = time.perf_counter()
        shutil.copytree(ws, tmp / "copy", symlinks=True)
        copy = time.perf_counter() - t
        shutil.rmtree(tmp / "copy")
        print(
            f"first checkpoint (all stored): {ms(first)}; copytree of it: {ms(copy)} "
            f"({first / copy:.2f}x)"
        )

        listed: list[float] = []
        cpus: list[float] = []
        scans: list[float] = []
        ratios: list[float] = []
        over: list[int] = []
        seq = 1
        for r in range(rounds):
            seq += 2
            target = ws / f"dir{r % 40:02d}" / f"file{r:05d}.bin"
            changed = os.urandom(kb * 1024)
            target.write_bytes(changed)  # the action's result is stored now
            t, c = time.perf_counter(), cpu()
            cp = await service.take(repo, cid, "r", seq, f"write {target.name}")
            rows = await store.checkpoints_of(cid)
            listed.append(time.perf_counter() - t)
            cpus.append(cpu() - c)
            assert cp is not None and rows[-1].seq == seq
            ratios.append(cp.bytes / len(changed))
            over.append(cp.bytes - int(1.5 * len(changed)))
            t = time.perf_counter()
            scan(ws)
            scans.append(time.perf_counter() - t)
        med, p95 = statistics.median(listed), sorted(listed)[int(0.95 * (len(listed) - 1))]
        base = statistics.median(scans)
        print(
            f"one-file action -> checkpoint listed: median {ms(med)}, p95 {ms(p95)} "
            f"(goal <= 50 ms); the workspace scan a prompt makes: {ms(base)} "
            f"({med / base:.2f}x)"
        )
        print(
            "CPU per one-file checkpoint (this process and git): "
            f"median {ms(statistics.median(cpus))}"
        )
        print(
            f"storage per checkpoint: {statistics.median(ratios):.3f}x the changed bytes "
            f"(max {max(ratios):.3f}x; largest excess over 1.5x: {max(over)} bytes; "
            f"goal <= 1.5x + 65536)"
        )

        # rewind across one changed file: to the checkpoint before the last
        before = (await store.checkpoints_of(cid))[-2].seq
        t = time.perf_counter()
        await service.rewind(repo, cid, before, _nothing)
        rewind = time.perf_counter() - t
        t = time.perf_counter()
        new = await service.fork(
            "1", repo, cid, seq, "fork", lambda n: tmp / "workspace" / "user_1" / n
        )
        fork = time.perf_counter() - t
        t = time.perf_counter()
        shutil.copytree(ws, tmp / "copy", symlinks=True)
        copy = time.perf_counter() - t
        forked = tmp / "workspace" / "user_1" / new
        same = sum(1 for p in forked.rglob("*") if p.is_file())
        print(
            f"rewind (one file back): {ms(rewind)}; fork ({same} files checked out): "
            f"{ms(fork)}; copytree baseline {ms(copy)} (fork {fork / copy:.2f}x; goal <= 1 s)"
        )
        await store.close()


async def _nothing() -> None:
    return None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--kb", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    asyncio.run(bench(args.files, args.kb, args.rounds))


if __name__ == "__main__":
    main()
