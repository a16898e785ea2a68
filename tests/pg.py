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


def reset(url: str) -> None:
    """The database as freshly migrated, for tests of what the store does rather than of
    its migrations: at the newest revision already, every table but Alembic's is emptied
    (sequences restarted), far cheaper than dropping the schema and migrating again (the
    store's own ``migrate`` then finds nothing to do, as on a restart); otherwise wiped and
    migrated (a test that writes rows itself, run first, finds the tables there)."""
    from backend.store.db import head_revision, upgrade

    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            tables = [
                row[0]
                for row in conn.execute(
                    text("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
                )
            ]
            at_head = (
                "alembic_version" in tables
                and conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
                == head_revision()
            )
            others = [t for t in tables if t != "alembic_version"]
            if at_head and others:
                names = ", ".join(f'"{t}"' for t in others)
                conn.execute(text(f"TRUNCATE {names} RESTART IDENTITY CASCADE"))
    finally:
        engine.dispose()
    if not (at_head and others):
        wipe(url)
        engine = create_engine(url)
        try:
            upgrade(engine)
        finally:
            engine.dispose()
