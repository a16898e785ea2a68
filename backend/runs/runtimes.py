"""The runtimes a process has made (each made once, labelled with the instance id), and
dropping a deleted conversation's sandboxes, here or when another process announces it."""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from backend.runtime import make_runtime
from backend.runtime.base import Runtime

if TYPE_CHECKING:
    from backend.config import Settings

log = logging.getLogger(__name__)


class Runtimes:
    def __init__(
        self, settings: Settings, owner: str, given: dict[str, Runtime] | None = None
    ) -> None:
        self.settings = settings
        self.owner = owner
        self._made: dict[str, Runtime] = dict(given or {})
        self._lock = threading.Lock()

    def get(self, name: str) -> Runtime:
        """The runtime ``name``, made once (the docker probe asks from a thread while the
        first run may ask from the loop); a docker runtime labels sandboxes with our id."""
        with self._lock:
            if name not in self._made:
                self._made[name] = make_runtime(self.settings, name, owner=self.owner)
            return self._made[name]

    def loaded(self) -> list[Runtime]:
        return list(self._made.values())

    async def forget(self, workspace: Path) -> None:
        """Drop what every runtime made here holds for ``workspace``."""
        for runtime in self.loaded():
            await runtime.forget(workspace)

    async def forget_announced(
        self, payload: str, workspace_of: Callable[[str, str], Path]
    ) -> None:
        """Another process deleted a conversation (``payload``: JSON [user id, conversation
        id, origin instance]): drop its sandboxes here."""
        try:
            user_id, conversation_id, origin = json.loads(payload)
            workspace = workspace_of(str(user_id), str(conversation_id))
        except (ValueError, TypeError):
            log.warning("ignored a malformed forget notification: %.200r", payload)
            return
        if origin == self.owner:
            return  # ours: the deletion dropped them before it returned
        try:
            await self.forget(workspace)
        except Exception:
            log.exception("dropping the sandboxes of a deleted conversation failed")

    async def close(self) -> None:
        for runtime in self.loaded():
            with contextlib.suppress(Exception):
                await runtime.close()
