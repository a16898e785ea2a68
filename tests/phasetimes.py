"""Where the suite spends its time, per module, in wall and CPU seconds: an opt-in pytest
plugin, `uv run pytest -p tests.phasetimes tests/e2e/test_logs.py`.

Each test's set-up, call and tear-down is timed in wall seconds and in CPU seconds (this
process and the processes it started and waited for: a `planact serve` counts once it is
stopped). On a shared machine the CPU figure is the one to compare between runs. The
summary lists modules slowest first; `PHASETIMES_OUT=file` also writes one TSV line per
test phase (node id, phase, wall, CPU) as the suite goes.
"""

from __future__ import annotations

import os
import resource
import time
from collections import defaultdict
from collections.abc import Generator
from typing import Any

import pytest

_modules: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])


def _cpu() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _timed(item: pytest.Item, phase: str) -> Generator[None, None, None]:
    wall, cpu = time.perf_counter(), _cpu()
    yield
    wall, cpu = time.perf_counter() - wall, _cpu() - cpu
    row = _modules[item.nodeid.split("::")[0]]
    row[0] += wall
    row[1] += cpu
    row[2] += phase == "call"
    out = os.environ.get("PHASETIMES_OUT")
    if out:
        with open(out, "a", encoding="utf-8") as f:
            f.write(f"{item.nodeid}\t{phase}\t{wall:.3f}\t{cpu:.3f}\n")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    yield from _timed(item, "setup")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    yield from _timed(item, "call")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, None, None]:
    yield from _timed(item, "teardown")


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _modules:
        return
    terminalreporter.write_sep("=", "time per module (wall s, CPU s, tests)")
    rows = sorted(_modules.items(), key=lambda kv: -kv[1][0])
    for module, (wall, cpu, tests) in rows:
        terminalreporter.write_line(f"{wall:8.1f} {cpu:8.1f} {int(tests):5d}  {module}")
    total_wall = sum(r[0] for r in _modules.values())
    total_cpu = sum(r[1] for r in _modules.values())
    terminalreporter.write_line(f"{total_wall:8.1f} {total_cpu:8.1f}        total")
