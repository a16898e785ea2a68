"""Serving limits derived from the settings and the open-files limit (backend/serve)."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

from backend.serve import FD_RESERVE, edge_limits
from backend.serve.protocol import EdgeLimits, raw_response
from tests.support.settings import make_settings


def test_the_connection_cap_fits_the_open_files_limit(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, http_max_connections=2048, http_header_timeout=2.5)
    assert edge_limits(settings, 100_000).max_connections == 2048
    assert edge_limits(settings, 1024).max_connections == 1024 - FD_RESERVE
    assert edge_limits(settings, 10).max_connections == 16
    assert edge_limits(settings, 100_000).header_timeout == 2.5


def test_the_sweep_ticks_a_few_times_per_shortest_timeout() -> None:
    assert EdgeLimits(header_timeout=2, body_timeout=30, write_timeout=30).tick == 0.5
    assert EdgeLimits(header_timeout=0.1).tick == 0.05
    assert EdgeLimits().tick == 1.0


def test_raw_responses_are_json_errors() -> None:
    raw = raw_response(408, "slow")
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408 Request Timeout")
    assert f"content-length: {len(body)}".encode() in head
    assert body == b'{"error": {"code": "timeout", "message": "slow"}}'


def test_the_soft_open_files_limit_is_raised_to_the_hard_one() -> None:
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    low = min(256, hard)
    code = (
        "import resource; from backend.serve import raise_nofile_limit; "
        "print(raise_nofile_limit(), resource.getrlimit(resource.RLIMIT_NOFILE)[0])"
    )

    def lower() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (low, hard))

    out = subprocess.run(
        [sys.executable, "-c", code], preexec_fn=lower, capture_output=True, text=True, check=True
    ).stdout.split()
    expected = hard if hard != resource.RLIM_INFINITY else 1 << 20
    assert [int(x) for x in out] == [expected, expected]
