"""The notifier seam: wake readers and owners across processes.

- ``LocalNotifier`` (the embedded default): everything stays in this process's ``Bus``.
- ``PgNotifier``: PostgreSQL LISTEN/NOTIFY. The store sends the NOTIFY for a message (and for
  a run's end, and for a stop request) in the same transaction as the row, so a listener
  hears of it exactly when it is committed. One listening connection per process, reconnected
  when lost; after a reconnect every reader is woken to re-read the store (nothing missed).

Both carry unstored live ``delta`` events: ``publish_delta(run_id, delta)`` delivers to the
readers of this process at once and, on PostgreSQL, to the other processes by a NOTIFY sent
outside any transaction (split so that each NOTIFY stays under PostgreSQL's 8000 bytes).
``request_catch_up(run_id, reader)`` gets a reader who attached mid-command the output so far:
from this process's run directly, or by asking the process that runs it (a NOTIFY on the
delta channel), which sends it to every reader in order with its live deltas.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from typing import Any, Protocol

from pydantic import ValidationError
from sqlalchemy.engine import make_url

from backend.messages.bus import Bus, Subscription
from backend.messages.deltas import DeltaEvent
from backend.store.repo import CONTROL_CHANNEL, MESSAGE_CHANNEL

log = logging.getLogger(__name__)

DELTA_CHANNEL = "planact_delta"
NOTIFY_LIMIT = 7900  # PostgreSQL refuses NOTIFY payloads of 8000 bytes and more
HEALTH_SECONDS = 5.0  # the listener checks its connection when it heard nothing this long

# (kind, argument): ("stop", run id), or ("forget", JSON [user id, conversation id, origin])
ControlHandler = Callable[[str, str], None]


class Notifier(Protocol):
    bus: Bus
    cross_process: bool  # True when wake-ups from other processes arrive (no polling needed)

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    def on_control(self, handler: ControlHandler) -> None:
        """``handler(kind, argument)`` is called for control requests (stop, forget) from any
        process."""

    def control(self, kind: str, run_id: str) -> None:
        """Deliver a control request recorded in the store to this process's handlers
        (other processes hear of it through the store's NOTIFY, when there is one)."""

    async def publish_delta(self, run_id: str, delta: DeltaEvent) -> None:
        """A live, unstored delta of ``run_id`` for every reader on every process."""

    def publish_delta_now(self, run_id: str, delta: DeltaEvent) -> bool:
        """The same, delivered at once when no other process needs to hear of it; False
        (nothing done) when it must go through ``publish_delta``."""

    async def request_catch_up(self, run_id: str, reader: Subscription) -> None:
        """``reader`` attached while ``run_id`` runs: have it get the output so far."""


class LocalNotifier:
    cross_process = False

    def __init__(self, bus: Bus | None = None) -> None:
        self.bus = bus or Bus()
        self._handlers: list[ControlHandler] = []

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None

    def on_control(self, handler: ControlHandler) -> None:
        self._handlers.append(handler)

    def control(self, kind: str, run_id: str) -> None:
        for handler in list(self._handlers):
            handler(kind, run_id)

    async def publish_delta(self, run_id: str, delta: DeltaEvent) -> None:
        self.bus.deliver_delta(run_id, delta)

    def publish_delta_now(self, run_id: str, delta: DeltaEvent) -> bool:
        self.bus.deliver_delta(run_id, delta)
        return True

    async def request_catch_up(self, run_id: str, reader: Subscription) -> None:
        self._local_catch_up(run_id, reader)

    def _local_catch_up(self, run_id: str, reader: Subscription) -> bool:
        source = self.bus.in_flight(run_id)
        if source is None:
            return False
        deltas = source.catch_up()
        if deltas:
            reader.deltas.extend(deltas)
            reader.set()
        return True


class PgNotifier(LocalNotifier):
    cross_process = True

    def __init__(self, database_url: str, instance_id: str, bus: Bus | None = None) -> None:
        super().__init__(bus)
        self.conninfo = psycopg_conninfo(database_url)
        self.instance_id = instance_id
        self._task: asyncio.Task[None] | None = None
        self._listening = asyncio.Event()
        self._sender: Any = None
        self._send_lock = asyncio.Lock()
        self.reconnects = 0

    async def start(self) -> None:
        self._task = asyncio.create_task(self._listen(), name="planact-listen")
        async with asyncio.timeout(30):
            await self._listening.wait()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._sender is not None:
            with contextlib.suppress(Exception):
                await self._sender.close()

    def publish_delta_now(self, run_id: str, delta: DeltaEvent) -> bool:
        return False  # other processes' readers hear of it by a NOTIFY: publish_delta

    async def publish_delta(self, run_id: str, delta: DeltaEvent) -> None:
        self.bus.deliver_delta(run_id, delta)
        for part in _split(delta):
            body = json.dumps(
                {"i": self.instance_id, "r": run_id, "p": part.model_dump(exclude_none=True)},
                separators=(",", ":"),
            )
            try:
                await self._send(body)
            except Exception as exc:  # deltas are best effort: the stored message follows
                log.warning("could not send a delta: %s", exc)
                return

    async def request_catch_up(self, run_id: str, reader: Subscription) -> None:
        if self._local_catch_up(run_id, reader):
            return
        body = json.dumps({"i": self.instance_id, "r": run_id, "c": 1}, separators=(",", ":"))
        try:
            await self._send(body)
        except Exception as exc:  # best effort: the stored message follows
            log.warning("could not ask for a run's output so far: %s", exc)

    async def _send(self, body: str) -> None:
        import psycopg

        async with self._send_lock:
            if self._sender is None or self._sender.closed:
                self._sender = await psycopg.AsyncConnection.connect(self.conninfo, autocommit=True)
            try:
                await self._sender.execute("SELECT pg_notify(%s, %s)", (DELTA_CHANNEL, body))
            except psycopg.OperationalError:
                self._sender = None
                raise

    async def _listen(self) -> None:
        import psycopg

        backoff = 0.1
        while True:
            try:
                conn = await psycopg.AsyncConnection.connect(
                    self.conninfo, autocommit=True, keepalives=1, keepalives_idle=10
                )
                async with conn:
                    for channel in (MESSAGE_CHANNEL, CONTROL_CHANNEL, DELTA_CHANNEL):
                        await conn.execute(f"LISTEN {channel}")
                    if self._listening.is_set():
                        self.reconnects += 1
                        log.warning("notification listener reconnected")
                    self._listening.set()
                    backoff = 0.1
                    # whatever was committed while we were not listening: read it again
                    self.bus.notify_all()
                    while True:
                        async for note in conn.notifies(timeout=HEALTH_SECONDS):
                            self._dispatch(note.channel, note.payload)
                        await conn.execute("SELECT 1")  # quiet: is the connection alive?
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("notification listener lost its connection (%s); retrying", exc)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 5.0)

    def _dispatch(self, channel: str, payload: str) -> None:
        if channel == MESSAGE_CHANNEL:
            self.bus.notify(payload)
        elif channel == CONTROL_CHANNEL:
            kind, _, run_id = payload.partition(":")
            self.control(kind, run_id)
        elif channel == DELTA_CHANNEL:
            try:
                data = json.loads(payload)
            except json.JSONDecodeError:
                return
            if data.get("i") == self.instance_id:  # our own were delivered directly
                return
            if data.get("c"):  # a reader elsewhere attached mid-command: if ours, answer
                source = self.bus.in_flight(str(data.get("r")))
                if source is not None:
                    source.send_catch_up()
                return
            try:
                delta = DeltaEvent.model_validate(data.get("p"))
            except ValidationError:  # not a delta (a newer writer's?): readers pass over it
                log.warning("a delta notification that is not a DeltaEvent was ignored")
                return
            self.bus.deliver_delta(str(data.get("r")), delta)


def _split(delta: DeltaEvent) -> list[DeltaEvent]:
    """Cut a delta whose text is too long for one NOTIFY into several (same uuid)."""
    plain = delta.model_dump(exclude_none=True)
    size = len(json.dumps(plain).encode())
    if size <= NOTIFY_LIMIT - 200:
        return [delta]
    text = delta.text
    rest = {k: v for k, v in plain.items() if k != "text"}
    room = max(200, (NOTIFY_LIMIT - 400 - len(json.dumps(rest).encode())) // 6)  # \uXXXX
    starts = range(0, len(text), room)
    offset = delta.offset  # each part starts where the one before ended
    return [
        delta.model_copy(
            update={"text": text[i : i + room], "offset": None if offset is None else offset + i}
        )
        for i in starts
    ] or [delta]


def psycopg_conninfo(database_url: str) -> str:
    """A libpq connection string from the SQLAlchemy URL."""
    url = make_url(database_url).set(drivername="postgresql")
    return url.render_as_string(hide_password=False)


def make_notifier(database_url: str, instance_id: str) -> Notifier:
    if make_url(database_url).get_backend_name() == "postgresql":
        return PgNotifier(database_url, instance_id)
    return LocalNotifier()
