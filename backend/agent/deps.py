"""RunDeps: what a run is given by the process that executes it (never stored)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from backend.actions.registry import Registry
    from backend.config import Settings
    from backend.llm.base import LLM
    from backend.messages.bus import Bus
    from backend.messages.deltas import DeltaEvent
    from backend.runtime.base import Runtime
    from backend.store.repo import Store
    from backend.tools.kit import Tools


class RunNotifier(Protocol):
    """What a run needs of the notifier seam (backend/runs/notify.py): the bus its stored
    messages go to, and live deltas for every reader on every process."""

    @property
    def bus(self) -> Bus: ...

    @property
    def cross_process(self) -> bool: ...

    async def publish_delta(self, run_id: str, delta: DeltaEvent) -> None: ...

    def publish_delta_now(self, run_id: str, delta: DeltaEvent) -> bool: ...


@dataclass(frozen=True)
class RunDeps:
    settings: Settings
    store: Store
    notifier: RunNotifier
    llm: LLM
    runtime: Runtime  # the run's view of it: every action first checks the stop flag
    actions: Registry  # the actions this process offers (backend/actions/registry)
    tools: Tools | None = None  # web search, web pages, MCP servers (None: none offered)
