"""Live deltas as a test reads them: a DeltaEvent's wire form (its JSON's fields), and the
DeltaEvent a test hands to the bus, the cursor or the feed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from backend.messages.deltas import DeltaEvent


def plain(delta: DeltaEvent) -> dict[str, Any]:
    """What the browser gets of ``delta``: the fields it has."""
    return delta.model_dump(exclude_none=True)


def collect(out: list[dict[str, Any]]) -> Callable[[DeltaEvent], None]:
    """A delta sink appending each delta's wire form to ``out``."""
    return lambda delta: out.append(plain(delta))


def delta(**fields: Any) -> DeltaEvent:
    return DeltaEvent.model_validate(fields)
