"""The executor seam: where a created run is executed.

- ``InlineExecutor`` (``EXECUTOR=inline``, the default): the process that takes the POST
  runs it, as an asyncio task, under its own lease.
- ``QueueExecutor`` (``EXECUTOR=queue``, PostgreSQL): the API process defers a procrastinate
  job; a ``planact worker`` process takes the job, claims the run in the store (it becomes
  the owner, with its lease) and executes it. Jobs are never retried: a lost worker's run
  is taken over by lease recovery, which queues a new job that goes on from the run's
  checkpoint (an action that was running is never run again).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from sqlalchemy.engine import make_url

log = logging.getLogger(__name__)

JOB_NAME = "planact_run"
QUEUE = "planact_runs"
SCHEMA_LOCK = 0x706C616E  # advisory lock key while applying procrastinate's schema


class Executor(Protocol):
    runs_here: bool  # True: the submitting process executes (and owns) the run

    async def start(self) -> None: ...

    async def submit(self, run_id: str) -> None:
        """The run row exists (status running): have it executed somewhere."""

    async def close(self) -> None: ...


class InlineExecutor:
    runs_here = True

    def __init__(self, launch: Callable[[str], object]) -> None:
        """``launch(run_id)`` executes the run in the background in this process."""
        self.launch = launch

    async def start(self) -> None:
        return None

    async def submit(self, run_id: str) -> None:
        self.launch(run_id)

    async def close(self) -> None:
        return None


class QueueConfigError(Exception):
    """EXECUTOR=queue without PostgreSQL."""


def require_postgres(database_url: str) -> None:
    if make_url(database_url).get_backend_name() != "postgresql":
        raise QueueConfigError(
            "EXECUTOR=queue needs PostgreSQL: set DATABASE_URL=postgresql://… (workers and "
            "API processes share the database), or use EXECUTOR=inline."
        )


def build_app(database_url: str, execute: Callable[[str], Awaitable[str]] | None = None) -> Any:
    """The procrastinate app with our one task; ``execute(run_id)`` runs it (workers)."""
    import procrastinate

    from backend.runs.notify import psycopg_conninfo

    app = procrastinate.App(
        connector=procrastinate.PsycopgConnector(
            conninfo=psycopg_conninfo(database_url), min_size=1, max_size=4
        )
    )

    @app.task(name=JOB_NAME, queue=QUEUE, retry=False)
    async def run_job(run_id: str) -> str:
        if execute is None:
            raise RuntimeError("this process does not execute runs")
        return await execute(run_id)

    return app


async def ensure_schema(database_url: str) -> None:
    """Apply procrastinate's schema once (several processes may start together)."""
    import psycopg
    from procrastinate.schema import SchemaManager

    from backend.runs.notify import psycopg_conninfo

    async with await psycopg.AsyncConnection.connect(
        psycopg_conninfo(database_url), autocommit=True
    ) as conn:
        await conn.execute("SELECT pg_advisory_lock(%s)", (SCHEMA_LOCK,))
        try:
            cur = await conn.execute("SELECT to_regclass('procrastinate_jobs')")
            row = await cur.fetchone()
            if row is None or row[0] is None:
                log.info("applying procrastinate's schema")
                await conn.execute(SchemaManager.get_schema())
        finally:
            await conn.execute("SELECT pg_advisory_unlock(%s)", (SCHEMA_LOCK,))


class QueueExecutor:
    runs_here = False

    def __init__(self, database_url: str) -> None:
        require_postgres(database_url)
        self.database_url = database_url
        self.app: Any = None

    async def start(self) -> None:
        await ensure_schema(self.database_url)
        self.app = build_app(self.database_url)
        await self.app.open_async()

    async def submit(self, run_id: str) -> None:
        assert self.app is not None, "QueueExecutor.start() was not called"
        await self.app.configure_task(JOB_NAME).defer_async(run_id=run_id)

    async def close(self) -> None:
        if self.app is not None:
            await self.app.close_async()
            self.app = None
