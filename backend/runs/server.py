"""`planact serve` under uvicorn, with a graceful SIGTERM.

First SIGTERM (or Ctrl-C): the server keeps answering (reads, streams, stops) but takes no
new runs (503); active runs are handed over at their next step boundary (at the latest
after SHUTDOWN_GRACE seconds, interrupted where they are): they stay `running` in the store
and another live process, or this one's next start, continues them. Streams of this
process hang up (a reader goes on elsewhere with its cursor); then uvicorn shuts down. A
second signal skips the grace.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from types import FrameType
from typing import TYPE_CHECKING, Any

import uvicorn

from backend.heap import freeze_startup_heap

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from backend.config import Settings
    from backend.runs.manager import RunManager

log = logging.getLogger(__name__)


class GracefulServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, manager: RunManager, grace: float) -> None:
        super().__init__(config)
        self.manager = manager
        self.grace = grace
        self._drain: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._forced: asyncio.Future[None] | None = None

    async def serve(self, sockets: Any = None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().serve(sockets)

    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets)  # the app's lifespan has started: the heap is built
        if not self.should_exit:
            freeze_startup_heap()

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self._drain is not None or self._loop is None or self.should_exit:
            # second signal: no more grace
            if self._drain is not None and not self._drain.done():
                self._loop.call_soon_threadsafe(self._force, sig, frame)  # type: ignore[union-attr]
                return
            super().handle_exit(sig, frame)
            return
        log.warning("shutting down: no new runs; active runs are handed over at their next step")
        self.manager.accepting = False
        self._loop.call_soon_threadsafe(self._start_drain, sig, frame)

    def _start_drain(self, sig: int, frame: FrameType | None) -> None:
        async def drain() -> None:
            with contextlib.suppress(Exception):
                await self.manager.drain(self.grace)
            self.manager.bus.close_readers()
            super(GracefulServer, self).handle_exit(sig, frame)

        self._drain = asyncio.ensure_future(drain())

    def _force(self, sig: int, frame: FrameType | None) -> None:
        self.grace = 0
        self._forced = asyncio.ensure_future(self.manager.drain(0))


def serve_gracefully(app: Starlette, settings: Settings, **options: Any) -> None:
    """``options`` go to uvicorn.Config (the HTTP edge's protocol and backlog)."""
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level="info",
        timeout_graceful_shutdown=10,
        proxy_headers=False,
        **options,
    )
    GracefulServer(config, app.state.manager, settings.shutdown_grace).run()
