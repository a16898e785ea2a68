"""uvicorn's access lines: successful reads at DEBUG, changes and failures at INFO."""

from __future__ import annotations

import logging

import pytest

from backend.logs import QuietReads


def access(method: str, status: int) -> logging.LogRecord:
    args = ("127.0.0.1:5000", method, "/api/conversations?access_token=x", "1.1", status)
    return logging.LogRecord(
        "uvicorn.access", logging.INFO, __file__, 1, '%s - "%s %s HTTP/%s" %d', args, None
    )


@pytest.mark.parametrize(
    ("method", "status", "level"),
    [
        ("GET", 200, logging.DEBUG),
        ("GET", 304, logging.DEBUG),
        ("HEAD", 200, logging.DEBUG),
        ("GET", 401, logging.INFO),
        ("GET", 500, logging.INFO),
        ("POST", 200, logging.INFO),
        ("DELETE", 204, logging.INFO),
    ],
)
def test_a_successful_read_is_a_debug_line(method: str, status: int, level: int) -> None:
    root = logging.getLogger()
    before = root.level
    try:
        root.setLevel(logging.INFO)
        record = access(method, status)
        kept = QuietReads().filter(record)
        assert record.levelno == level
        assert kept == (level == logging.INFO)  # a DEBUG line is written only under DEBUG
        root.setLevel(logging.DEBUG)
        record = access(method, status)
        assert QuietReads().filter(record) and record.levelno == level
    finally:
        root.setLevel(before)


def test_other_uvicorn_lines_pass_untouched() -> None:
    record = logging.LogRecord("uvicorn.error", logging.INFO, __file__, 1, "Started", None, None)
    assert QuietReads().filter(record) and record.levelno == logging.INFO
