"""A migrated SQLite database that tests copy instead of migrating.

Every app a test makes on a fresh SQLite file (``make_settings``) and every `planact serve`
a test starts (tests/e2e/server.py) ran the same Alembic migrations: in each server process
the Alembic import and every revision (about 0.4 s of CPU), per in-process app every revision
again. The template is made once per test process by the real migrations
(:func:`backend.store.db.upgrade`); a copy is at the newest revision, so the store's own
``upgrade`` at start-up finds nothing to do (the path a restart takes). Tests of the
migrations themselves, and any test that wants the first start, use files of their own.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

from backend.store.db import make_engine, upgrade

_template: Path | None = None


def template() -> Path:
    """The migrated database file, made on first use (removed when the process ends)."""
    global _template
    if _template is None or not _template.exists():
        folder = Path(tempfile.mkdtemp(prefix="planact-migrated-"))
        atexit.register(shutil.rmtree, folder, True)
        path = folder / "migrated.db"
        engine = make_engine(f"sqlite:///{path}")
        try:
            upgrade(engine)
        finally:
            engine.dispose()  # the last connection closed: the WAL is checkpointed
        _template = path
    return _template


def place_migrated(database: Path) -> None:
    """Put a copy of the migrated database at ``database`` unless a file is there."""
    if database.exists():
        return
    database.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(template(), database)
