"""The in-process bus: 'something new was stored for this run', and live deltas.

The store is the source of truth: a message reaches the bus only after it was committed.
For runs that live in this process the bus also keeps their stored messages, so that live
readers do not have to query the store once per message; every other reader (replay,
resume of a finished run, another process's run) reads the store. Wake-ups from other
processes arrive through the notifier (backend/runs/notify.py), which calls ``notify``.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict, deque
from typing import Protocol

from backend.messages.deltas import DeltaEvent
from backend.messages.message import Message

DELTA_BACKLOG = 1000  # deltas a slow reader may fall behind before old ones are dropped


class CatchUpSource(Protocol):
    """What a live run of this process has in flight (``backend/agent/live.py``)."""

    def catch_up(self) -> list[DeltaEvent]:
        """The output of its running commands so far, as deltas with offsets."""
        ...

    def send_catch_up(self) -> None:
        """The same, sent to every reader on every process in order with its deltas."""
        ...


class Subscription(asyncio.Event):
    """One reader's wake-up flag, with the live deltas that arrived since it last looked.

    Its wait's time limit is kept by one lazy timer of its own: a wait sets a deadline;
    the timer, when it fires before the deadline (a later wait moved it), re-arms for it.
    A reader woken every 50 ms by deltas costs one timer per limit's length, not one
    armed and cancelled per wait."""

    def __init__(self) -> None:
        super().__init__()
        self.deltas: deque[DeltaEvent] = deque(maxlen=DELTA_BACKLOG)
        self._deadline: float | None = None  # loop time the wait under way ends
        self._timer: asyncio.TimerHandle | None = None
        self._timed_out = False

    def take_deltas(self) -> list[DeltaEvent]:
        out = list(self.deltas)
        self.deltas.clear()
        return out

    async def wait_at_most(self, seconds: float) -> bool:
        """Wait until set (True) or ``seconds`` pass (False); cleared either way."""
        loop = asyncio.get_running_loop()
        self._deadline = deadline = loop.time() + seconds
        self._timed_out = False
        if self._timer is None or self._timer.when() > deadline:
            if self._timer is not None:
                self._timer.cancel()
            self._timer = loop.call_at(deadline, self._expire, loop)
        try:
            await self.wait()
            return not self._timed_out
        finally:
            self._deadline = None
            self.clear()

    def _expire(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer = None
        deadline = self._deadline
        if deadline is None:  # no wait under way: the next one arms again
            return
        if loop.time() >= deadline:
            self._timed_out = True
            self.set()
        else:
            self._timer = loop.call_at(deadline, self._expire, loop)

    def stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


class Bus:
    def __init__(self) -> None:
        self._waiters: dict[str, set[Subscription]] = defaultdict(set)
        self._live: dict[str, list[Message]] = {}
        self._floor: dict[str, int] = {}  # a live run's messages up to this seq: in the store
        self._in_flight: dict[str, CatchUpSource] = {}
        # a run of this process that ended while readers followed it: its final status,
        # its messages kept (in _live) until the last of those readers has gone
        self._ended: dict[str, str] = {}
        self.closing = False  # set when the process shuts down: readers end their streams

    # -- runs of this process -------------------------------------------------------------
    def mark_live(self, key: str, floor: int = 0, in_flight: CatchUpSource | None = None) -> None:
        """A run of this process started: it publishes every message it stores. ``floor``:
        the seq of its last message stored before (a run taken over from another process);
        a reader behind it reads the store. ``in_flight``: its output so far, for readers
        who attach mid-command."""
        self._live[key] = []
        self._floor[key] = floor
        self._ended.pop(key, None)
        if in_flight is not None:
            self._in_flight[key] = in_flight

    def mark_done(self, key: str, ended: str | None = None) -> None:
        """The run left this process. ``ended``: the final status this process stored for
        it (None: it did not end here, e.g. it parked or was handed over). Readers of an
        ended run get its last messages and its status from here, not from the store."""
        self._in_flight.pop(key, None)
        if ended is not None and key in self._live and self._waiters.get(key):
            self._ended[key] = ended
        else:
            self._forget(key)
        self.notify(key)

    def _forget(self, key: str) -> None:
        self._live.pop(key, None)
        self._floor.pop(key, None)
        self._ended.pop(key, None)

    def in_flight(self, key: str) -> CatchUpSource | None:
        """The run ``key``'s in-flight output when it runs in this process."""
        return self._in_flight.get(key)

    def is_live(self, key: str) -> bool:
        return key in self._live and key not in self._ended

    def ended(self, key: str) -> str | None:
        """The final status of a run that ended in this process while it was followed."""
        return self._ended.get(key)

    def publish(self, key: str, stored: Message) -> None:
        """``stored`` was committed to the store: keep it for live readers, wake them."""
        messages = self._live.get(key)
        if messages is not None:
            messages.append(stored)
        self.notify(key)

    def stored_after(self, key: str, after: int) -> list[Message] | None:
        """The live run's messages with seq > after, or None when the run is not live here
        (or ``after`` is before what it kept). An ended run's are kept while it is followed
        (:meth:`ended`)."""
        messages = self._live.get(key)
        if messages is None or after < self._floor.get(key, 0):
            return None
        start = len(messages)
        while start > 0 and messages[start - 1].seq > after:  # readers read from the end
            start -= 1
        return messages[start:]

    # -- live deltas (never stored) -------------------------------------------------------
    def has_readers(self, key: str) -> bool:
        """Someone in this process follows ``key`` (live deltas for it are worth making)."""
        return bool(self._waiters.get(key))

    def deliver_delta(self, key: str, delta: DeltaEvent) -> None:
        for sub in self._waiters.get(key, ()):
            sub.deltas.append(delta)
            sub.set()

    # -- wake-ups -------------------------------------------------------------------------
    def notify(self, key: str) -> None:
        for event in self._waiters.get(key, ()):
            event.set()

    def notify_all(self) -> None:
        """Wake every reader (e.g. the cross-process listener reconnected: re-read)."""
        for waiters in list(self._waiters.values()):
            for event in waiters:
                event.set()

    def close_readers(self) -> None:
        self.closing = True
        self.notify_all()

    async def wait(self, key: str, event: asyncio.Event, seconds: float) -> bool:
        """Wait until notified (True) or the time passes (False)."""
        if isinstance(event, Subscription):
            return await event.wait_at_most(seconds)
        try:
            async with asyncio.timeout(seconds):
                await event.wait()
            return True
        except TimeoutError:
            return False
        finally:
            event.clear()

    def subscribe(self, key: str) -> Subscription:
        event = Subscription()
        self._waiters[key].add(event)
        return event

    def unsubscribe(self, key: str, event: asyncio.Event) -> None:
        if isinstance(event, Subscription):
            event.stop_timer()
        waiters = self._waiters.get(key)
        if waiters is not None:
            waiters.discard(event)
            if not waiters:
                del self._waiters[key]
                if key in self._ended:  # its last reader has gone
                    self._forget(key)
