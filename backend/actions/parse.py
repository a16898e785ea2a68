"""Placeholder canonical-XML parser (replaced by the full dialect parser)."""

from __future__ import annotations

import re
from typing import Any

from backend.actions.model import ACTIONS, Action, FormatError

_THINK = re.compile(r"<(think|thinking)>(.*?)</\1>", re.S)


def extract_thinking(text: str) -> list[str]:
    return [m.group(2).strip() for m in _THINK.finditer(text) if m.group(2).strip()]


def parse_actions(
    text: str,
    *,
    finish_reason: str | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
) -> list[Action]:
    text = _THINK.sub("", text)
    names = "|".join(ACTIONS)
    actions: list[Action] = []
    for m in re.finditer(rf"<({names})>(.*?)</\1>", text, re.S):
        spec = ACTIONS[m.group(1)]
        params: dict[str, str] = {}
        for p in (*spec.required, *spec.optional):
            pm = re.search(rf"<{p}>(.*?)</{p}>", m.group(2), re.S)
            if pm:
                params[p] = pm.group(1)
        actions.append(Action(m.group(1), params))
    if not actions:
        raise FormatError("No action found. Reply with one of: " + ", ".join(ACTIONS))
    return actions
