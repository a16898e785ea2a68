"""The Publisher: every message of a run goes through it. Store first (the store assigns
its seq and commits), then notify; every reader reads from the store."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING

from backend.messages.message import Message

if TYPE_CHECKING:
    from backend.messages.bus import Bus
    from backend.store.parked import NewWait
    from backend.store.repo import Store

Listener = Callable[[Message], Awaitable[None] | None]


class Publisher:
    def __init__(
        self,
        store: Store,
        bus: Bus,
        conversation_id: str,
        run_id: str,
        listener: Listener | None = None,
        owner: str | None = None,
    ) -> None:
        self.store = store
        self.bus = bus
        self.conversation_id = conversation_id
        self.run_id = run_id
        self.listener = listener  # this process's follower of the run (the CLI)
        # the executing process: its writes are fenced by it (store.RunNotOwned once the
        # run was taken over); None for a process that closes a run it does not execute
        self.owner = owner

    async def publish(
        self,
        msg: Message,
        on_stored: Callable[[Message], None] | None = None,
        *,
        cancelled: bool = False,
        checkpoint: str | None = None,
        wait: NewWait | None = None,
        run_fields: Mapping[str, str] | None = None,
    ) -> Message:
        """Store ``msg`` (even when cancelled meanwhile), call ``on_stored`` with the stored
        message, notify the readers, then the listener. A cancellation that arrived
        meanwhile (or before: ``cancelled``) is raised once the message is stored and
        known. ``checkpoint``: the run's state, stored in the message's transaction, as
        ``wait`` (the run parks on this message: store/waits.py) and ``run_fields``."""
        msg.conversation_id = self.conversation_id
        msg.run_id = self.run_id
        stored, cancelled_now = await _store_through_cancellation(
            self.store, msg, checkpoint, wait, self.owner, run_fields
        )
        cancelled = cancelled or cancelled_now
        if on_stored is not None:
            on_stored(stored)
        self.bus.publish(self.run_id, stored)
        if cancelled:
            raise asyncio.CancelledError()
        if self.listener is not None:
            result = self.listener(stored)
            if result is not None:
                await result
        return stored


async def _store_through_cancellation(
    store: Store,
    msg: Message,
    checkpoint: str | None = None,
    wait: NewWait | None = None,
    owner: str | None = None,
    run_fields: Mapping[str, str] | None = None,
) -> tuple[Message, bool]:
    """Store ``msg`` even when the run is cancelled meanwhile (the write runs on the store's
    thread and completes anyway): a stored `running` message must be known to the run, so
    that its final partner is published when the run ends. Returns (stored, cancelled)."""
    write = asyncio.ensure_future(store.append_message(msg, checkpoint, wait, owner, run_fields))
    cancelled = False
    while True:
        try:
            return await asyncio.shield(write), cancelled
        except asyncio.CancelledError:
            cancelled = True
            if write.done() and write.cancelled():
                raise
