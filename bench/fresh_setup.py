"""`make run` on a fresh machine: seconds until /api/health answers, and lines printed first.

    .venv/bin/python bench/fresh_setup.py [--baseline REF] [--runs N]

Each run clones this checkout's HEAD (and REF, the baseline, measured alternately in the same
session) into a new folder with empty uv and npm caches, so every package comes from the
registries as on a new machine, starts `make run` on a free port and stops it once
`/api/health` answers. uv itself is taken from the machine (a fresh one installs it first).
Not part of `make bench`: it downloads every package each run.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def one_run(ref: str) -> tuple[float, int]:
    with tempfile.TemporaryDirectory(prefix="planact-fresh-") as tmp:
        tree = Path(tmp) / "planact"
        subprocess.run(["git", "clone", "-q", "--no-checkout", str(ROOT), str(tree)], check=True)
        subprocess.run(["git", "-C", str(tree), "checkout", "-q", ref], check=True)
        port = free_port()
        env = {
            **os.environ,
            "UV_CACHE_DIR": f"{tmp}/uv-cache",
            "npm_config_cache": f"{tmp}/npm-cache",
            "PORT": str(port),
            "VIRTUAL_ENV": "",
        }
        env.pop("VIRTUAL_ENV")
        lines: list[str] = []
        start = time.monotonic()
        proc = subprocess.Popen(
            ["make", "run"],
            cwd=tree,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        assert proc.stdout is not None
        reader = threading.Thread(target=lambda: lines.extend(proc.stdout or []), daemon=True)
        reader.start()
        try:
            while True:
                if proc.poll() is not None:
                    raise SystemExit(f"make run ended ({proc.returncode}):\n{''.join(lines)}")
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=1).is_success:
                        break
                except httpx.HTTPError:
                    pass
                time.sleep(0.2)
            seconds = time.monotonic() - start
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)
            reader.join(timeout=5)
        # the server's own lines are its log lines ("2026-… INFO name: …") and uvicorn's
        setup = [line for line in lines if not _server_line(line)]
        return seconds, len(setup)


def _server_line(line: str) -> bool:
    return (line[:2] == "20" and line[4:5] == "-") or line.startswith(("INFO:", "WARNING:"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--baseline", help="a git ref measured alternately with HEAD")
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    refs = {"HEAD": "HEAD"}
    if args.baseline:
        refs["baseline"] = args.baseline
    figures: dict[str, list[tuple[float, int]]] = {name: [] for name in refs}
    for _ in range(args.runs):
        for name, ref in refs.items():
            figures[name].append(one_run(ref))
            seconds, count = figures[name][-1]
            print(f"{name:9} {seconds:6.1f} s to healthy, {count} lines before the server's")
    for name, runs in figures.items():
        median = statistics.median(s for s, _ in runs)
        print(f"{name:9} median {median:.1f} s, lines {sorted({c for _, c in runs})}")
    if "baseline" in figures:
        ratio = statistics.median(s for s, _ in figures["HEAD"]) / statistics.median(
            s for s, _ in figures["baseline"]
        )
        print(f"HEAD / baseline time: {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
