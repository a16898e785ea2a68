"""The local runtime's wrapper (backend/runtime/reaper.py) on its own: stop signals that
come in a burst still end with every process the command started killed."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from backend.runtime.local import REAPER
from tests.support.runtime import eventually, host_count_marked, wait_for_file


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


def reap(
    command: str, *limits: str, pass_fds: tuple[int, ...] = (), stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-I", "-S", REAPER, str(os.getpid()), command, *limits],
        pass_fds=pass_fds,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_reaper_and_its_command_hold_no_inherited_descriptor() -> None:
    read, write = os.pipe()
    inherited = (os.dup2(read, 200), os.dup2(write, 201))
    try:
        # bash runs one command in its own place: $PPID is the reaper
        done = reap("ls /proc/$PPID/fd /proc/$$/fd", pass_fds=inherited)
    finally:
        for fd in (read, write, *inherited):
            os.close(fd)
    assert done.returncode == 0, done.stderr
    reaper_fds, command_fds = done.stdout.split("\n\n")
    assert reaper_fds.splitlines()[1:] == ["0", "1", "2"]
    assert command_fds.splitlines()[1:] == ["0", "1", "2", "3"]  # 3: ls reading the folder


def test_the_file_size_limit_reaches_the_command() -> None:
    done = reap("ulimit -f; head -c 2M /dev/zero > /dev/null", "--rlimit", "RLIMIT_FSIZE=1048576")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "1024\n"  # blocks of 1024 bytes


@pytest.mark.parametrize(
    ("limits", "stdin"),
    [
        (("--rlimit", "RLIMIT_NOSUCH=1"), ""),
        (("--wait-for-group",), "0"),  # the server could not put it in its groups
        (("--wait-for-group",), ""),  # the server went away first
    ],
)
def test_a_limit_that_cannot_be_applied_fails_the_command(
    tmp_path: Path, limits: tuple[str, ...], stdin: str
) -> None:
    done = reap(f"touch {tmp_path}/ran", *limits, stdin=stdin)
    assert done.returncode == 126
    assert "could not start in its limits" in done.stderr
    assert not (tmp_path / "ran").exists()


def test_the_wrapper_waits_for_the_servers_go_ahead(tmp_path: Path) -> None:
    done = reap("cat; echo ran", "--wait-for-group", stdin="1 and the rest")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ran\n"  # the command's stdin is /dev/null, as without the wait
