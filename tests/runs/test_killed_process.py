"""The stand-in for ``kill -9`` that the crash tests use (tests/support/runs.py): once a
process is "killed", nothing of it reaches the store, by any of the store's ways in (the
database thread's ORM and Core paths, and the quick path SQLite takes on the loop)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.runs import ReactiveLLM, a_process, close, kill


async def test_a_killed_process_reaches_the_store_by_no_path(tmp_path: Path, db_url: str) -> None:
    m = await a_process(tmp_path, db_url, ReactiveLLM())
    try:
        cid = await m.store.create_conversation("1", "before")  # the quick path, alive
        kill(m, "no-such-run")
        with pytest.raises(ConnectionError):
            await m.store.create_conversation("1", "after")  # quick (Core)
        with pytest.raises(ConnectionError):
            await m.store.get_run("no-such-run")  # quick (ORM)
        with pytest.raises(ConnectionError):
            await m.store.rename_conversation("1", cid, "renamed")
    finally:
        await close(m)
