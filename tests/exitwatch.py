"""A pytest plugin: the test process ends soon after its session, whatever is left running.

After the session (its result line and coverage printed) the interpreter still joins every
non-daemon thread and runs the libraries' exit handlers; one of them that never returns
would keep the process (and CI) waiting until CI's own time limit, with nothing printed. So
when the session is over a watchdog starts: if the process is still alive ``GRACE_SECONDS``
later, it prints what is left (every thread's stack, the child processes) to stderr and
ends the process with the session's own exit status: the tests' result stands as printed,
and what hung is named for whoever fixes it. Should even that watchdog be unable to run,
faulthandler ends the process (status 1, the stacks dumped) at twice the grace.

``PLANACT_TEST_EXIT_GRACE`` (seconds) changes the grace. Loaded by tests/conftest.py."""

from __future__ import annotations

import faulthandler
import os
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

GRACE_SECONDS = 120.0

_status: list[int] = []


def grace() -> float:
    return float(os.environ.get("PLANACT_TEST_EXIT_GRACE", GRACE_SECONDS))


def children(pid: int) -> list[str]:
    """The live child processes of ``pid`` (pid and command line), from /proc."""
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            kids = (task / "children").read_text().split()
        except OSError:
            continue
        for kid in kids:
            try:
                cmd = Path(f"/proc/{kid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                cmd = "?"
            found.append(f"{kid} {cmd.strip()}")
    return found


def _end_stuck_process(seconds: float, status: int) -> None:
    err = sys.__stderr__
    assert err is not None
    err.write(
        f"\nThe test process has not ended {seconds:g} s after its session "
        f"(exit status {status}); what is left:\n"
    )
    names = ", ".join(f"{t.name} (daemon={t.daemon})" for t in threading.enumerate())
    err.write(f"threads: {names}\nchild processes: {children(os.getpid()) or 'none'}\n")
    err.flush()
    faulthandler.dump_traceback(file=err, all_threads=True)
    err.flush()
    os._exit(status)


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    _status.append(int(exitstatus))


@pytest.hookimpl(tryfirst=True)
def pytest_unconfigure(config: Any) -> None:
    seconds = grace()
    status = _status[-1] if _status else 1
    watch = threading.Timer(seconds, _end_stuck_process, (seconds, status))
    watch.name, watch.daemon = "planact-test-exit-watch", True
    watch.start()
    err = sys.__stderr__
    if err is not None:
        faulthandler.dump_traceback_later(2 * seconds, exit=True, file=err)
