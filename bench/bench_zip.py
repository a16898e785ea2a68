"""Workspace zip figures: `uv run python bench/bench_zip.py`. Prints, never asserts.

GET /api/conversations/{id}/files.zip through the real ASGI app:
- the time to its 413 for a workspace holding a 20 GB sparse file (no disk used), against
  the baseline of listing the same workspace (GET …/files, the same scan) in the same run;
- the time to zip 1 GB of that sparse file, the work the old code did (into a temporary
  file, in a thread nobody could stop) 20 times over before answering at all;
- streaming throughput for 40 MB of real data against :mod:`zipfile` writing a temporary
  file (what the old code did), in the same run.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from starlette.testclient import TestClient

from backend.app import create_app
from backend.llm.testing import ScriptedLLM
from tests.support.settings import make_settings

GB = 1 << 30
REPEAT = 5


def timed(fn: object, repeat: int = REPEAT) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def zip_to_temp(src: Path) -> None:
    """The old way: zipfile into a temporary file, then served from it."""
    fd, tmp = tempfile.mkstemp(suffix=".zip")
    os.close(fd)
    try:
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
            for path in sorted(src.rglob("*")):
                if path.is_file():
                    zf.write(path, path.relative_to(src).as_posix())
    finally:
        os.unlink(tmp)


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="planact-bench-") as tmp:
        root = Path(tmp)
        settings = make_settings(root, workspace_max_mb=1024)
        app = create_app(settings, llm=ScriptedLLM([]))
        with TestClient(app) as client:
            state = client.app.state  # type: ignore[attr-defined]
            cid = client.post("/api/conversations", json={}).json()["conversation_id"]
            ws = state.manager.workspace("1", cid)
            ws.mkdir(parents=True, exist_ok=True)
            (ws / "note.txt").write_text("note")
            with open(ws / "s.bin", "wb") as f:
                f.truncate(20 * GB)

            def refused() -> None:
                assert client.get(f"/api/conversations/{cid}/files.zip").status_code == 413

            def listed() -> None:
                assert client.get(f"/api/conversations/{cid}/files").status_code == 200

            t413, tlist = timed(refused), timed(listed)
            print("workspace with a 20 GB sparse file, WORKSPACE_MAX_MB=1024 (median of 5)")
            print(f"  files.zip -> 413      {t413 * 1000:8.1f} ms")
            print(f"  GET …/files (baseline) {tlist * 1000:7.1f} ms   ratio {t413 / tlist:.2f}x")

            one = root / "one-gb"
            one.mkdir()
            with open(one / "s.bin", "wb") as f:
                f.truncate(GB)
            wall, cpu = time.perf_counter(), time.process_time()
            zip_to_temp(one)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            print(f"  old way, 1 GB of it into a temporary zip: {wall:.1f} s wall, {cpu:.1f} s CPU")
            print(f"    (old code: all 20 GB before its first byte, ~{cpu * 20:.0f} s CPU)")

            os.unlink(ws / "s.bin")
            data = root / "data"
            data.mkdir()
            for i in range(4):
                (data / f"r{i}.bin").write_bytes(os.urandom(5_000_000))
                (ws / f"r{i}.bin").write_bytes((data / f"r{i}.bin").read_bytes())
                text = b"".join(b"line %d of a log file, some words\n" % j for j in range(150_000))
                (data / f"t{i}.txt").write_bytes(text)
                (ws / f"t{i}.txt").write_bytes(text)
            size = sum(p.stat().st_size for p in data.iterdir()) / 1e6

            def streamed() -> None:
                got = client.get(f"/api/conversations/{cid}/files.zip")
                assert got.status_code == 200 and len(got.content) > 0

            tnew, told = timed(streamed, 3), timed(lambda: zip_to_temp(data), 3)
            print(f"{size:.0f} MB (half random, half text), median of 3")
            print(f"  files.zip streamed          {tnew:6.2f} s  {size / tnew:6.0f} MB/s")
            print(f"  zipfile to a temp (baseline) {told:5.2f} s  ratio {tnew / told:.2f}x")


if __name__ == "__main__":
    main()
