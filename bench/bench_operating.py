"""What operating it costs: a JSON log line against a text one (same record, same run, the
log context bound), building the OpenAPI document, and one GET /api/ready (database ping,
migration revision, the default runtime's probe) through the ASGI app.

    uv run python bench/bench_operating.py [--lines N] [--probes N]

Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from starlette.testclient import TestClient

from backend.api.docs import ERROR_TEXT
from backend.api.models import ErrorBody
from backend.app import create_app
from backend.config import Settings
from backend.logctx import JsonFormatter, bind
from backend.openapi import ApiInfo, build_document

TEXT = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")


def per_line_us(formatter: logging.Formatter, record: logging.LogRecord, n: int) -> float:
    started = time.perf_counter()
    for _ in range(n):
        formatter.format(record)
    return (time.perf_counter() - started) / n * 1e6


def settings(tmp: Path, **extra: Any) -> Settings:
    values: dict[str, Any] = {
        "database_url": f"sqlite:///{tmp}/planact.db",
        "workspace_dir": tmp / "workspace",
        "llm_model": "scripted/model",
        "frontend_dist": tmp / "no-ui",
        "allowed_hosts": "testserver",
        **extra,
    }
    return Settings(_env_file=None, **values)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, default=50_000)
    parser.add_argument("--probes", type=int, default=30)
    args = parser.parse_args()
    record = logging.LogRecord(
        "planact.runs", logging.INFO, __file__, 1, "run %s ended: status %s", ("r1", "ok"), None
    )
    bound = bind(run_id="a" * 32, conversation_id="b" * 32, user="alice")
    text_us, json_us = [], []
    for _ in range(5):  # interleaved, so that machine load hits both alike
        text_us.append(per_line_us(TEXT, record, args.lines // 5))
        json_us.append(per_line_us(JsonFormatter(), record, args.lines // 5))
    bound.reset()
    t, j = statistics.median(text_us), statistics.median(json_us)
    print(f"log line, text: {t:6.2f} us   json: {j:6.2f} us   ratio {j / t:4.2f}x")

    with tempfile.TemporaryDirectory() as tmp:
        for label, extra in (("local, bwrap", {}), ("local, no sandbox", {"local_sandbox": "off"})):
            sub = Path(tmp) / label.replace(" ", "").replace(",", "")
            sub.mkdir()
            app = create_app(settings(sub, **extra))
            with TestClient(app) as client:
                info = ApiInfo("planact", "0", "", ErrorBody, ERROR_TEXT)
                started = time.perf_counter()
                build_document(app.routes, info)
                built_ms = (time.perf_counter() - started) * 1000
                times = []
                for _ in range(args.probes):
                    started = time.perf_counter()
                    assert client.get("/api/ready").status_code == 200
                    times.append((time.perf_counter() - started) * 1000)
            print(
                f"GET /api/ready ({label}, SQLite): median {statistics.median(times):6.1f} ms"
                f"  max {max(times):6.1f} ms   OpenAPI document built in {built_ms:5.1f} ms"
            )


if __name__ == "__main__":
    main()
