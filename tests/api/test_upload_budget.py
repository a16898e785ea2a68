"""The upload budget lock (backend/uploads.py): exclusive across processes, and uploads
still work, said once in the log, where the file system cannot lock a folder."""

from __future__ import annotations

import errno
import fcntl
import logging
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from backend import uploads
from backend.uploads import with_budget_lock

# a second process: try the folder's lock without waiting, say whether it got it
PROBE = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
try:
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    print("got")
except BlockingIOError:
    print("busy")
"""


def probe(folder: Path) -> str:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(folder)], capture_output=True, text=True, timeout=60
    )
    return out.stdout.strip()


def test_the_budget_lock_excludes_another_process_until_released(tmp_path: Path) -> None:
    folder = tmp_path / "Conversation_x"
    inside = threading.Event()
    leave = threading.Event()

    def hold() -> None:
        inside.set()
        assert leave.wait(60)

    holder = threading.Thread(target=with_budget_lock, args=(folder, hold))
    holder.start()
    assert inside.wait(60)
    try:
        assert probe(folder) == "busy"
    finally:
        leave.set()
        holder.join(60)
    assert probe(folder) == "got"
    assert list(folder.iterdir()) == []  # the lock leaves no file behind


def test_a_folder_that_cannot_be_locked_still_takes_uploads_and_says_so_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """NFS refuses an exclusive flock on a descriptor not open for writing (EBADF)."""

    def refuse(_fd: int, _op: int) -> None:
        raise OSError(errno.EBADF, "Bad file descriptor")

    monkeypatch.setattr(fcntl, "flock", refuse)
    monkeypatch.setattr(uploads, "_warned", set())
    with caplog.at_level(logging.WARNING, logger="backend.uploads"):
        assert with_budget_lock(tmp_path / "a", lambda: 1) == 1
        assert with_budget_lock(tmp_path / "b", lambda: 2) == 2
    warnings = [r for r in caplog.records if "cannot lock" in r.getMessage()]
    assert len(warnings) == 1 and "WORKSPACE_MAX_MB" in warnings[0].getMessage()


def test_another_lock_failure_is_not_hidden(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(_fd: int, _op: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(fcntl, "flock", broken)
    ran: list[int] = []
    with pytest.raises(OSError, match="Input/output"):
        with_budget_lock(tmp_path / "a", lambda: ran.append(1))
    assert ran == []
