"""A pytest plugin: one line for the skipped tests (pyproject uses -rfE, not -ra), grouped by
reason, so that the result line stays the last thing seen. Loaded by tests/conftest.py."""

from __future__ import annotations

from typing import Any


def pytest_terminal_summary(terminalreporter: Any) -> None:
    skipped = terminalreporter.stats.get("skipped", [])
    if not skipped:
        return
    reasons: dict[str, int] = {}
    for report in skipped:
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        reason = reason.removeprefix("Skipped: ").split("(")[0].strip()
        reasons[reason] = reasons.get(reason, 0) + 1
    parts = "; ".join(f"{n} x {r}" for r, n in sorted(reasons.items(), key=lambda x: -x[1]))
    terminalreporter.write_line(f"{len(skipped)} skipped: {parts} (-rs lists them)")
