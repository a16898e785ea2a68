"""The local runtime's wrapper (backend/runtime/reaper.py) on its own: stop signals that
come in a burst still end with every process the command started killed."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from backend.runtime.local import REAPER
from tests.runtime.conftest import eventually, host_count_marked, wait_for_file


async def test_a_burst_of_stop_signals_still_kills_what_the_command_started(
    tmp_path: Path,
) -> None:
    marker = f"6161{os.getpid() % 1000:03d}"
    for attempt in range(20):
        ready = tmp_path / f"go{attempt}.txt"
        command = f"setsid sleep {marker}{attempt} & echo go > {ready}; sleep {marker}9"
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-I", "-S", REAPER, str(os.getpid()), command, cwd=tmp_path
        )
        await wait_for_file(ready)
        for _ in range(50):  # a second signal came while the first was being handled
            proc.send_signal(signal.SIGTERM)
        assert await proc.wait() == 128 + signal.SIGTERM

        async def gone() -> bool:
            return host_count_marked(marker) == 0

        await eventually(gone, what=f"the command's processes to die (attempt {attempt})")
