"""Per-run budgets: tokens, cost, wall time and model calls, checked before every model call.

The first limit reached ends the run with an `error` that names the setting and what was
spent (BudgetExceeded is a RunError: the pipeline ends the run with its message).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from backend.agent.errors import RunError
from backend.messages.payloads import RunBudget

if TYPE_CHECKING:
    from backend.config import Settings
    from backend.llm.base import Completion


class BudgetExceeded(RunError):
    """A per-run budget (RUN_MAX_*) was reached. The message is for the user."""

    def __init__(self, message: str, setting: str) -> None:
        super().__init__(message)
        self.setting = setting


def limits(settings: Settings) -> RunBudget:
    """The run budgets as the UI shows them (None = no limit)."""
    return RunBudget(
        max_tokens=settings.run_max_tokens,
        max_cost_usd=settings.run_max_cost_usd,
        max_seconds=settings.run_max_seconds,
        max_model_calls=settings.run_max_model_calls,
    )


@dataclass
class Budget:
    """What one run has spent so far. Wall time is an elapsed amount (``seconds``, settled
    at each checkpoint), never a clock reading: a run resumed by another process goes on
    counting from what it had spent."""

    seconds: float = 0.0
    calls: int = 0
    tokens: int = 0
    cost: float = 0.0
    cost_unknown: bool = False  # a call came back without a price

    def add(self, completion: Completion) -> None:
        self.calls += 1
        self.tokens += completion.prompt_tokens + completion.completion_tokens
        if completion.cost is None:
            self.cost_unknown = True
        elif math.isfinite(completion.cost):
            self.cost += completion.cost

    def __post_init__(self) -> None:
        self.__dict__["_since"] = time.monotonic()

    def elapsed(self) -> float:
        since = self.__dict__.setdefault("_since", time.monotonic())
        return self.seconds + time.monotonic() - float(since)

    def settle(self) -> None:
        """Fold the time spent since the last settle into ``seconds`` (before a checkpoint)."""
        now = time.monotonic()
        self.seconds = self.elapsed()
        self.__dict__["_since"] = now

    def check(self, settings: Settings) -> None:
        """Raise BudgetExceeded when the next model call would go over a budget."""
        s = settings
        if s.run_max_model_calls and self.calls >= s.run_max_model_calls:
            self._stop("RUN_MAX_MODEL_CALLS", f"{s.run_max_model_calls:,} model calls")
        if s.run_max_tokens and self.tokens >= s.run_max_tokens:
            self._stop("RUN_MAX_TOKENS", f"{s.run_max_tokens:,} tokens")
        if s.run_max_cost_usd and self.cost >= s.run_max_cost_usd:
            self._stop("RUN_MAX_COST_USD", f"${s.run_max_cost_usd:,.2f}")
        if s.run_max_seconds and self.elapsed() >= s.run_max_seconds:
            self._stop("RUN_MAX_SECONDS", f"{s.run_max_seconds:,.0f} seconds")

    def spent(self) -> str:
        cost = f"${self.cost:,.4f}" if self.cost < 1 else f"${self.cost:,.2f}"
        if self.cost_unknown:
            cost += " (some calls had no price)" if self.cost else " (no price known)"
        return (
            f"{self.tokens:,} tokens, {cost}, {self.calls:,} model calls, {self.elapsed():,.0f} s"
        )

    def _stop(self, setting: str, limit: str) -> None:
        raise BudgetExceeded(
            f"The run stopped: it reached {setting} ({limit}). Spent: {self.spent()}. "
            f"Raise {setting} to allow bigger runs, or split the goal into smaller ones.",
            setting,
        )
