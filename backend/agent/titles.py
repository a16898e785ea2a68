"""Conversation titles a person can tell apart."""

from __future__ import annotations

TITLE_CHARS = 80


def goal_title(goal: str) -> str:
    """The default title: the goal's first words."""
    line = " ".join(goal.split())
    return line[:TITLE_CHARS] + ("…" if len(line) > TITLE_CHARS else "")
