"""Conversation titles a person can tell apart."""

from __future__ import annotations

import re

TITLE_CHARS = 80
_LEAD = re.compile(
    r"^(?:(?:sure|ok(?:ay)?|certainly|alright|great|of course)[,.!]?\s+)?"
    r"(?:i(?:'|\u2019)ll|i will|i am going to|i'm going to|let me|we(?:'|\u2019)ll|we will)\s+",
    re.IGNORECASE,
)


def goal_title(goal: str) -> str:
    """The default title: the goal's first words."""
    line = " ".join(goal.split())
    return line[:TITLE_CHARS] + ("…" if len(line) > TITLE_CHARS else "")


def title_from_plan(prose: str) -> str:
    """The planner's first sentence as a title ("I'll analyse data.csv and chart the
    totals." -> "Analyse data.csv and chart the totals"); "" when it says too little."""
    text = " ".join(prose.split())
    if not text:
        return ""
    first = re.split(r"(?<=[.!?])\s", text, maxsplit=1)[0].rstrip(".!?: ")
    stripped = _LEAD.sub("", first)
    if stripped == first and not re.match(r"^[A-Z][a-z]+\w*\s", first):
        return ""  # not a sentence about the work
    if len(stripped.split()) < 3:
        return ""
    title = stripped[0].upper() + stripped[1:]
    if len(title) > TITLE_CHARS:
        title = title[:TITLE_CHARS].rsplit(" ", 1)[0] + "…"
    return title
