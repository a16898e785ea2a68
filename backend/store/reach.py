"""Whether the database of DATABASE_URL answers, said in one line (for start-up).

``planact serve`` and ``planact worker`` ask before anything else uses the database: a
database nobody answers is one line naming it (password hidden) and why, and a non-zero
exit, never a traceback from inside the server's start-up.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError

from backend.store.db import make_engine

CONNECT_SECONDS = 10  # the longest a start waits for a PostgreSQL server to answer


def shown_url(url: str) -> str:
    """The URL with its password hidden."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return "(an unreadable URL)"


def unreachable(url: str) -> str | None:
    """None when the database answers a query, else one line saying which database could
    not be reached and why."""
    try:
        engine = make_engine(url, connect_timeout=CONNECT_SECONDS)
    except (ArgumentError, ValueError) as exc:
        return f"DATABASE_URL {shown_url(url)} is not a database URL: {exc}"
    except ImportError as exc:
        return f"DATABASE_URL {shown_url(url)} needs a driver that is not installed: {exc}"
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except (SQLAlchemyError, OSError) as exc:
        cause = getattr(exc, "orig", None) or exc
        why = " ".join(str(cause).split()) or type(cause).__name__
        return f"cannot reach the database at {shown_url(url)} (DATABASE_URL): {why}"
    finally:
        engine.dispose()
    return None
