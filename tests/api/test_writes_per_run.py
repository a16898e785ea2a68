"""What one run writes and how many transactions it commits, counted with SQLAlchemy events
on every engine, on SQLite and PostgreSQL: pinned, so that a write or a transaction added to
a run's path fails here (bench/bench_cpu.py prints the same per run under load)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event, select
from starlette.testclient import TestClient

from backend.app import create_app
from backend.llm.testing import ScriptedLLM
from backend.store.base import RUNS
from tests.sse_client import collect
from tests.support.settings import make_settings

# the run's own tables; the process's lease (instances) renews on its own clock
RUN_TABLES = ("conversations", "runs", "messages", "usage", "tasks")
WRITES = ("INSERT", "UPDATE", "DELETE")


@contextmanager
def run_writes() -> Iterator[Counter[str]]:
    """Writes to the run's tables (by verb and table) and the transactions committed with
    at least one of them, on any engine meanwhile."""
    counts: Counter[str] = Counter()
    dirty: set[int] = set()  # DBAPI connections whose open transaction wrote a run table

    def executed(conn: Any, _cursor: Any, statement: str, *_rest: Any) -> None:
        words = statement.split()
        verb = words[0].upper() if words else ""
        if verb not in WRITES:
            return
        table = words[2] if verb != "UPDATE" else words[1]
        if table.strip('"') in RUN_TABLES:
            counts[f"{verb} {table}"] += 1
            counts["writes"] += 1
            dirty.add(id(conn.connection.dbapi_connection))

    def committed(conn: Any) -> None:
        key = id(conn.connection.dbapi_connection)
        if key in dirty:
            dirty.discard(key)
            counts["transactions"] += 1

    event.listen(Engine, "after_cursor_execute", executed)
    event.listen(Engine, "commit", committed)
    try:
        yield counts
    finally:
        event.remove(Engine, "after_cursor_execute", executed)
        event.remove(Engine, "commit", committed)


def test_a_chat_run_writes_in_few_transactions(tmp_path: Path, db_url: str) -> None:
    settings = make_settings(tmp_path, database_url=db_url)
    llm = ScriptedLLM(
        [
            ("route", '{"task_type": "general_chat", "needs_tools": false}'),
            ("auto_reply", "42."),
        ]
    )
    with TestClient(create_app(settings, llm=llm)) as client:  # noqa: SIM117 - not its shutdown
        with run_writes() as counts:
            with client.stream("POST", "/api/agent/run", json={"goal": "Meaning?"}) as resp:
                assert resp.status_code == 200
                messages, end = collect(resp.iter_lines())
            assert end is not None and end["status"] == "completed"
    assert llm.errors == []
    assert [m["meta"]["action_type"] for m in messages] == ["question", "auto_reply"]
    # what the run stores (nothing weaker): its start files and task type with the next
    # checkpoint instead of their own transactions
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            task_type, start_files = conn.execute(
                select(RUNS.c.task_type, RUNS.c.start_files).where(RUNS.c.id == end["run_id"])
            ).one()
    finally:
        engine.dispose()
    assert (task_type, start_files) == ("general_chat", "{}")  # an empty workspace
    assert dict(counts) == {
        "INSERT conversations": 1,
        "INSERT runs": 1,
        "INSERT messages": 2,
        "INSERT usage": 2,
        # the seq of each message; the end (a new conversation is made running and named)
        "UPDATE conversations": 3,
        # each message's checkpoint (fenced), the checkpoint before each model call (with
        # the start files, then the task type), the end
        "UPDATE runs": 5,
        "writes": 14,
        # the run's start with its conversation, each message, each model call's
        # checkpoint and usage, the end: 4 fewer than the 12 with their own transactions
        "transactions": 8,
    }
