"""The runs suites run over SQLite and PostgreSQL (``db_url``: a fresh database each)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.pg import postgres_url, wipe


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/runs.db"
    url = postgres_url()
    wipe(url)
    return url
