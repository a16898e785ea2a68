"""The store contract suite runs every test over SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from backend.store.repo import Store
from tests.pg import postgres_url, wipe


@pytest.fixture(params=["sqlite", "postgresql"])
async def store(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[Store]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/db.sqlite"
    else:
        url = postgres_url()
        wipe(url)
    s = Store(url)
    s.migrate()
    s.migrate()  # idempotent
    yield s
    await s.close()
