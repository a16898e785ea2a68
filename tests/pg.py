"""PostgreSQL for tests: TEST_POSTGRES_URL names a database the tests may wipe.

Without it the PostgreSQL variants skip, unless REQUIRE_POSTGRES=1 (CI), where they fail.
"""

from __future__ import annotations

import os

import pytest
from sqlalchemy import create_engine, text


def postgres_url() -> str:
    url = os.environ.get("TEST_POSTGRES_URL", "")
    if not url:
        if os.environ.get("REQUIRE_POSTGRES") == "1":
            pytest.fail("REQUIRE_POSTGRES=1 but TEST_POSTGRES_URL is not set")
        pytest.skip("TEST_POSTGRES_URL not set (scripts/ci.d/10-postgres.sh starts one)")
    return url


def wipe(url: str) -> None:
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text("DROP SCHEMA public CASCADE"))
        conn.execute(text("CREATE SCHEMA public"))
    engine.dispose()
