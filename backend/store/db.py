"""Engine creation and migrations."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

MIGRATIONS = Path(__file__).resolve().parent / "migrations"


def make_engine(
    url: str, *, never_wait: bool = False, connect_timeout: int | None = None
) -> Engine:
    """``never_wait`` (SQLite): connections that fail at once when another holds the lock
    (busy timeout 0) and never checkpoint the WAL (backend/store/committer.py).
    ``connect_timeout`` (PostgreSQL): seconds a connection may take to open."""
    parsed = make_url(url)
    kwargs: dict[str, Any] = {}
    if parsed.get_backend_name() == "sqlite":
        database = parsed.database
        if database and database != ":memory:":
            Path(database).parent.mkdir(parents=True, exist_ok=True)
        kwargs["connect_args"] = {"check_same_thread": False, "timeout": 0 if never_wait else 30}
    elif parsed.get_backend_name() == "postgresql" and parsed.get_driver_name() in ("", None):
        parsed = parsed.set(drivername="postgresql+psycopg")
    if connect_timeout is not None and parsed.get_backend_name() == "postgresql":
        kwargs["connect_args"] = {"connect_timeout": connect_timeout}
    # a ping before every checkout only helps servers that drop idle connections
    pre_ping = parsed.get_backend_name() != "sqlite"
    engine = create_engine(parsed, pool_pre_ping=pre_ping, **kwargs)
    if parsed.get_backend_name() == "sqlite":

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA foreign_keys=ON")
            if never_wait:
                cur.execute("PRAGMA wal_autocheckpoint=0")
            cur.close()

    return engine


def is_sqlite_file(url: str) -> bool:
    parsed = make_url(url)
    return parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:")


def head_revision() -> str | None:
    """The newest migration's id, read from the version files (no Alembic import)."""
    revisions: dict[str, str | None] = {}
    for path in (MIGRATIONS / "versions").glob("*.py"):
        text = path.read_text(encoding="utf-8")
        rev = re.search(r"^revision\s*=\s*['\"]([^'\"]+)['\"]", text, re.M)
        down = re.search(r"^down_revision\s*=\s*['\"]([^'\"]+)['\"]", text, re.M)
        if rev:
            revisions[rev.group(1)] = down.group(1) if down else None
    heads = set(revisions) - {d for d in revisions.values() if d}
    return heads.pop() if len(heads) == 1 else None


def current_revision(engine: Engine) -> str | None:
    try:
        with engine.connect() as conn:
            return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
    except SQLAlchemyError:
        return None


def upgrade(engine: Engine) -> None:
    """Apply every Alembic migration (idempotent). Alembic is only imported when the
    database is not at the newest revision already (keeps restarts fast)."""
    head = head_revision()
    if head is not None and current_revision(engine) == head:
        return
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")
