"""The families the store knows for the whole deployment, read at scrape time: runs active
and waiting, queued jobs. Cheap queries (the partial index of running runs); on any
process, the same values (query them with max(), not sum())."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy import Engine, text

log = logging.getLogger(__name__)

RUNS_SQL = text("SELECT count(*), count(wait_uuid) FROM runs WHERE status = 'running'")
PREVIEWS_SQL = text(
    "SELECT p.state, i.id IS NOT NULL FROM previews p LEFT JOIN instances i "
    "ON i.id = p.owner AND i.expires_at > :now WHERE p.kind = 'service'"
)
PREVIEW_STATES = ("starting", "ready", "stopped", "failed")
QUEUE_TABLE_SQL = text("SELECT to_regclass('procrastinate_jobs')")
QUEUED_SQL = text(
    "SELECT count(*) FROM procrastinate_jobs WHERE status = 'todo' AND queue_name = :queue"
)


class StoreCollector(Collector):
    """Reads the store with its own (synchronous) engine: call it off the event loop."""

    def __init__(self, engine: Engine, queue: str) -> None:
        self.engine = engine
        self.queue = queue

    def collect(self) -> Iterator[GaugeMetricFamily]:
        active = GaugeMetricFamily(
            "planact_runs_active", "Runs running now, in the whole deployment (not waiting)."
        )
        waiting = GaugeMetricFamily(
            "planact_runs_waiting", "Runs waiting for a person (an approval, a question)."
        )
        previews = GaugeMetricFamily(
            "planact_preview_services",
            "Preview services in the whole deployment, by state (a live one whose owner "
            "died reads stopped).",
            labels=["state"],
        )
        queued = GaugeMetricFamily(
            "planact_queued_jobs", "Runs queued for a worker and not taken yet (EXECUTOR=queue)."
        )
        try:
            with self.engine.connect() as conn:
                running, parked = conn.execute(RUNS_SQL).one()
                states = dict.fromkeys(PREVIEW_STATES, 0)
                # naive UTC, as the store writes its times
                now = datetime.now(UTC).replace(tzinfo=None)
                for state, alive in conn.execute(PREVIEWS_SQL, {"now": now}):
                    if state in ("starting", "ready") and not alive:
                        state = "stopped"
                    states[state] = states.get(state, 0) + 1
                jobs = 0
                if (
                    self.engine.dialect.name == "postgresql"
                    and conn.execute(QUEUE_TABLE_SQL).scalar()
                ):
                    jobs = conn.execute(QUEUED_SQL, {"queue": self.queue}).scalar() or 0
        except Exception as exc:  # the database is away: these families are absent
            log.warning("metrics: could not read the store: %s", exc)
            return
        active.add_metric([], int(running) - int(parked))
        waiting.add_metric([], int(parked))
        queued.add_metric([], int(jobs))
        for state, count in states.items():
            previews.add_metric([state], count)
        yield active
        yield previews
        yield waiting
        yield queued
