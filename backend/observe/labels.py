"""Bounded label values: a label never carries a user's text or an unbounded name."""

from __future__ import annotations

from collections.abc import Iterable

OTHER = "other"
STAGES = frozenset(("route", "auto_reply", "planning", "thinking", "summary"))
RUN_STATUSES = frozenset(("completed", "failed", "stopped"))
ACTION_STATUSES = frozenset(("success", "failure", "error"))
DECISIONS = frozenset(("approve", "approve_all", "reject", "timeout"))


def bounded(value: str | None, allowed: Iterable[str]) -> str:
    """``value`` when it is one of ``allowed``, else "other"."""
    return value if value and value in allowed else OTHER


class ModelLabels:
    """The model label of a process: the configured models (LLM_MODEL, LLM_MODELS) by
    name, anything else (a specialist's model, a typo) as "other"."""

    def __init__(self, models: Iterable[str | None]) -> None:
        self.models = frozenset(m for m in models if m)

    def __call__(self, model: str | None) -> str:
        return bounded(model, self.models)
