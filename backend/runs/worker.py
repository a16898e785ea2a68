"""`planact worker`: executes queued runs (EXECUTOR=queue, PostgreSQL)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from typing import Any

from backend.config import Settings
from backend.heap import freeze_startup_heap
from backend.llm.dispatch import DispatchLLM
from backend.llm.factory import make_llm
from backend.observe.endpoint import Listener
from backend.observe.tracing import flush_tracing, setup_tracing

log = logging.getLogger(__name__)


async def prewarm(llm: DispatchLLM) -> None:
    """Import litellm (seconds) off the event loop before taking runs, when the model needs
    it: an import on the loop at the first model call would stall the lease renewal."""
    thread = llm.prewarm()
    if thread is not None:
        await asyncio.to_thread(thread.join)


async def close_stalled_jobs(app: Any) -> None:
    """Jobs of workers that died (no heartbeat for a minute) stay `doing` in procrastinate's
    table: mark them failed, never retried. Their runs are taken over by lease recovery."""
    from procrastinate.jobs import Status

    from backend.runs.executor import QUEUE

    try:
        stalled = await app.job_manager.get_stalled_jobs(queue=QUEUE, seconds_since_heartbeat=60)
        for job in stalled:
            await app.job_manager.finish_job(job, Status.FAILED, delete_job=False)
            log.warning("job %s of a dead worker marked failed (run %s)", job.id, job.task_kwargs)
    except Exception:
        log.exception("could not close stalled jobs")


STALLED_EVERY = 30.0  # seconds between two looks for a dead worker's jobs


async def keep_closing_stalled_jobs(app: Any, every: float = STALLED_EVERY) -> None:
    """While workers run, not only at a worker's start: a worker killed while the others go
    on would leave its job `doing` until the next start."""
    while True:
        await asyncio.sleep(every)
        await close_stalled_jobs(app)


async def run_worker(settings: Settings, concurrency: int | None = None) -> int:
    from procrastinate.worker import Worker

    from backend.runs.executor import JOB_NAME, QUEUE, build_app, ensure_schema, require_postgres
    from backend.runs.manager import RunManager
    from backend.store.repo import Store

    require_postgres(settings.database_url)
    setup_tracing("planact-worker")  # metrics and traces: only with an OTLP endpoint set
    llm = make_llm(settings)
    await prewarm(llm)
    store = Store(settings.database_url)
    await asyncio.to_thread(store.migrate)
    await ensure_schema(settings.database_url)
    manager = RunManager.for_process(settings, store, llm, kind="worker")
    listener = _metrics_listener(settings, store)
    app = build_app(settings.database_url, manager.execute)
    await app.open_async()

    async def requeue(run_id: str) -> None:
        await app.configure_task(JOB_NAME).defer_async(run_id=run_id)

    manager.requeue = requeue  # a run taken over from a dead owner is queued again
    await manager.open()
    await close_stalled_jobs(app)
    closer = asyncio.create_task(keep_closing_stalled_jobs(app))
    freeze_startup_heap()
    worker = Worker(
        app,
        queues=[QUEUE],
        name=manager.instance_id,
        concurrency=concurrency or settings.worker_concurrency,
        install_signal_handlers=False,
        listen_notify=True,
        fetch_job_polling_interval=2.0,
        delete_jobs="successful",
    )
    loop = asyncio.get_running_loop()
    stopping: list[asyncio.Task[Any]] = []

    async def graceful() -> None:
        # stop taking jobs; active runs are handed over at their next step (another worker
        # continues them), at the latest after SHUTDOWN_GRACE
        manager.accepting = False
        worker.stop()  # type: ignore[no-untyped-call]
        await manager.drain(settings.shutdown_grace)

    def on_signal() -> None:
        if stopping:
            log.warning("second signal: handing the active runs over now")
            stopping.append(asyncio.ensure_future(manager.drain(0)))
            return
        log.warning("stopping: no new runs; active runs are handed over at their next step")
        stopping.append(asyncio.ensure_future(graceful()))

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal)
    print(f"planact worker {manager.instance_id} ready", flush=True)
    try:
        await worker.run()  # type: ignore[no-untyped-call]
        for task in stopping:
            with contextlib.suppress(Exception):
                await task
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        closer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await closer
        await manager.shutdown()
        await llm.aclose()
        await app.close_async()
        if listener is not None:
            listener.close()
        await store.close()
        flush_tracing()
    return 0


def _metrics_listener(settings: Settings, store: Any) -> Listener | None:
    """The worker's GET /metrics on METRICS_HOST:METRICS_PORT (None: METRICS=0 or port 0)."""
    from backend.observe.endpoint import Exposition, start_listener
    from backend.runs.executor import QUEUE

    if not settings.metrics or not settings.metrics_port:
        return None
    exposition = Exposition(store.engine, settings.metrics_token, QUEUE)
    return start_listener(exposition, settings.metrics_host, settings.metrics_port)
