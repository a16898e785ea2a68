"""A run's feed: every event of one run after a cursor, in order, from one place.

The events are the run's stored messages (``Message``, with its ``seq``, the cursor), live
``DeltaEvent`` deltas (model text as it is written, command output: never stored, never
replayed) and one ``End`` with the run's final status. A reader who reaches the tip while a
command runs asks for the output so far (``Notifier.request_catch_up``); an
``OutputCursor`` (backend/runs/catchup.py) makes catch-up and live deltas one gapless,
duplicate-free stream per command. The feed first catches up from the
store, then waits for news from the notifier: this process's runs through the bus (which
also keeps their stored messages, so live readers need no store query per message), other
processes' runs through PostgreSQL LISTEN/NOTIFY. A slow periodic store read stays as a
safety net (and is the only news of another process's run on SQLite).

Encoders turn it into a wire format: ``backend/api/sse.py`` (planact's SSE stream) and
``backend/lemonai/stream.py`` (the LemonAI client's tokens).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

from backend.messages.deltas import DeltaEvent
from backend.messages.message import Message
from backend.observe import metrics
from backend.runs.catchup import OutputCursor
from backend.runs.notify import Notifier
from backend.store.repo import Store

SAFETY_POLL_SECONDS = 5.0  # notifications cross processes: re-read only as a safety net
LOCAL_POLL_SECONDS = 1.0  # no cross-process notifications (SQLite): another process's run
BATCH = 500


@dataclass(frozen=True)
class End:
    """The run ended (the last event of a feed): its final status."""

    conversation_id: str
    run_id: str
    status: str


# a live, unstored delta (docs/api.md "The stream") is the DeltaEvent as it was published
FeedEvent = Message | DeltaEvent | End


async def run_feed(
    store: Store, notifier: Notifier, conversation_id: str, run_id: str, after: int = 0
) -> AsyncIterator[FeedEvent]:
    """The run's events after the stored message ``after`` (a seq; 0: from the start).

    Ends after ``End``; or without it when this process shuts down while another process
    runs the run (the reader resumes elsewhere with its cursor)."""
    bus = notifier.bus
    poll = SAFETY_POLL_SECONDS if notifier.cross_process else LOCAL_POLL_SECONDS
    event = bus.subscribe(run_id)
    # deltas go only to a reader that has every stored message so far: one that is still
    # catching up (a replay, a resume) would get them before the messages they belong to
    caught_up = False
    cursor = OutputCursor()
    asked = False  # for the output so far of a command running when we reached the tip
    metrics.OPEN_STREAMS.inc()  # a reader of the run's events (SSE, the LemonAI client)
    try:
        last = after
        while True:
            deltas = event.take_deltas()  # taken before the messages read below
            ended = bus.ended(run_id)  # read before them too: an ended run's are all kept
            live = bus.stored_after(run_id, last)
            if live is not None:
                # a run of this process: its stored messages are on the bus, and it
                # notifies on every message and when it ends
                if caught_up or not live:
                    for delta in _admitted(deltas, cursor):
                        yield delta
                for msg in live:
                    last = msg.seq
                    if msg.status != "running":
                        cursor.done(msg.uuid)
                    yield msg
                if not live:
                    caught_up = True
                    if ended is not None:  # it ended in this process: nothing comes after
                        yield End(conversation_id, run_id, ended)
                        return
                    if not asked:
                        asked = True
                        await notifier.request_catch_up(run_id, event)
                    await event.wait_at_most(SAFETY_POLL_SECONDS)
                continue
            msgs = await store.messages(conversation_id, run_id=run_id, after=last, limit=BATCH)
            if caught_up or not msgs:
                for delta in _admitted(deltas, cursor):
                    yield delta
            caught_up = len(msgs) < BATCH  # at the tip of the stored messages
            for msg in msgs:
                last = msg.seq
                if msg.status != "running":
                    cursor.done(msg.uuid)
                yield msg
            if len(msgs) == BATCH:
                continue
            run = await store.get_run(run_id)
            if run is None or run.status not in ("running", "waiting"):
                # the run stored its last message before its status: read once more
                for msg in await store.messages(conversation_id, run_id=run_id, after=last):
                    last = msg.seq
                    yield msg
                yield End(conversation_id, run_id, run.status if run else "failed")
                return
            if bus.closing:
                # this process shuts down while another one runs the run: hang up, the
                # reader resumes elsewhere with its cursor
                return
            if not asked:
                asked = True
                await notifier.request_catch_up(run_id, event)
            await event.wait_at_most(poll)
    finally:
        metrics.OPEN_STREAMS.dec()
        bus.unsubscribe(run_id, event)


def _admitted(deltas: list[DeltaEvent], cursor: OutputCursor) -> list[DeltaEvent]:
    out = []
    for delta in deltas:
        admitted = cursor.admit(delta)
        if admitted is not None:
            out.append(admitted)
    return out
