"""Upload figures: `uv run python bench/bench_upload.py`. Prints, never asserts.

POST /api/conversations/{id}/files through the real ASGI app (multipart parse, spool,
checks, atomic write) against the baseline of copying the same bytes from one file to
another on the same disk, measured in the same run."""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from starlette.testclient import TestClient

from backend.app import create_app
from backend.llm.testing import ScriptedLLM
from tests.support.settings import make_settings

SIZES_MB = (1, 10, 40)
REPEAT = 3


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="planact-bench-") as tmp:
        root = Path(tmp)
        settings = make_settings(root, upload_max_mb=100, workspace_max_mb=10_000)
        app = create_app(settings, llm=ScriptedLLM([]))
        with TestClient(app) as client:
            cid = client.post("/api/conversations", json={}).json()["conversation_id"]
            print(f"{'size':>6} {'upload s':>9} {'MB/s':>7} {'copy s':>8} {'ratio':>6}")
            for mb in SIZES_MB:
                data = bytes(range(256)) * (mb * 4096)
                src = root / f"src-{mb}.bin"
                src.write_bytes(data)
                uploads, copies = [], []
                for i in range(REPEAT):
                    started = time.perf_counter()
                    resp = client.post(
                        f"/api/conversations/{cid}/files",
                        files=[("file", (f"f{mb}-{i}.bin", data, "application/octet-stream"))],
                    )
                    uploads.append(time.perf_counter() - started)
                    assert resp.status_code == 201, resp.text
                    started = time.perf_counter()
                    shutil.copyfile(src, root / f"copy-{mb}-{i}.bin")
                    copies.append(time.perf_counter() - started)
                up, cp = statistics.median(uploads), statistics.median(copies)
                print(f"{mb:>4}MB {up:>9.3f} {mb / up:>7.0f} {cp:>8.3f} {up / cp:>5.1f}x")


if __name__ == "__main__":
    main()
