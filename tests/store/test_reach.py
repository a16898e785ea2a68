"""The start-up's one-line answer to whether DATABASE_URL's database answers."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.store.reach import unreachable


def test_a_database_that_answers_is_reachable(tmp_path: Path) -> None:
    assert unreachable(f"sqlite:///{tmp_path}/data/planact.db") is None


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("not a url", "DATABASE_URL (an unreadable URL) is not a database URL"),
        ("nosuchdb://h/x", "DATABASE_URL nosuchdb://h/x is not a database URL"),
        (
            "postgresql+pg8000://u:pw@h/x",
            "DATABASE_URL postgresql+pg8000://u:***@h/x needs a driver",
        ),
    ],
)
def test_a_url_that_names_no_usable_database_says_so_in_one_line(url: str, said: str) -> None:
    found = unreachable(url)
    assert found is not None and found.startswith(said) and "\n" not in found


def test_a_sqlite_file_that_cannot_be_opened_is_named(tmp_path: Path) -> None:
    (tmp_path / "dir.db").mkdir()  # a directory where the file should be
    found = unreachable(f"sqlite:///{tmp_path}/dir.db")
    assert found is not None
    assert found.startswith(f"cannot reach the database at sqlite:///{tmp_path}/dir.db")
