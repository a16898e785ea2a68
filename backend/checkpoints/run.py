"""A run's checkpoints: one after each action's result (taken on a worker thread while the
model is asked for the next step; the next action waits for it, so each checkpoint is the
workspace exactly after its action), one at the run's end."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from backend.checkpoints.gitrepo import GitRepo
from backend.checkpoints.service import END_OF_RUN, Checkpoints

log = logging.getLogger(__name__)


class RunCheckpoints:
    def __init__(self, checkpoints: Checkpoints, repo: GitRepo, cid: str, run_id: str) -> None:
        self.checkpoints = checkpoints
        self.repo = repo
        self.cid = cid
        self.run_id = run_id
        self._pending: asyncio.Task[None] | None = None

    def after_action(self, seq: int | None, label: str) -> None:
        """The action whose result message is ``seq`` ran: its checkpoint, in the
        background (after the one before it)."""
        if seq is None:
            return
        before = self._pending
        self._pending = asyncio.create_task(self._take(before, seq, label, always=False))

    async def settle(self) -> None:
        """Wait for the checkpoint under way (before the next action touches the files)."""
        pending, self._pending = self._pending, None
        if pending is not None:
            with contextlib.suppress(Exception):
                await pending

    async def end_of_run(self, seq: int) -> None:
        await self.settle()
        await self._take(None, seq, END_OF_RUN, always=True)

    async def _take(
        self, before: asyncio.Task[None] | None, seq: int, label: str, *, always: bool
    ) -> None:
        if before is not None:
            with contextlib.suppress(Exception):
                await before
        try:
            await self.checkpoints.take(self.repo, self.cid, self.run_id, seq, label, always=always)
        except Exception:  # a checkpoint never fails the run
            log.exception("checkpoint of run %s at seq %s failed", self.run_id, seq)
