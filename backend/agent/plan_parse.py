"""Placeholder plan parser (JSON array only); replaced by the full planner parser."""

from __future__ import annotations

import json
import re


class PlanFormatError(ValueError):
    pass


def parse_plan(text: str) -> tuple[str, list[dict[str, str]]]:
    m = re.search(r"\[.*\]", text, re.S)
    if not m:
        raise PlanFormatError("Reply with a JSON array of tasks.")
    try:
        data = json.loads(m.group(0))
    except json.JSONDecodeError as exc:
        raise PlanFormatError(f"Reply with a JSON array of tasks: {exc}") from exc
    tasks = [
        {"title": str(t.get("title", "")), "description": str(t.get("description", "")),
         "requirement": str(t.get("requirement", ""))}
        for t in data if isinstance(t, dict)
    ]
    if not tasks:
        raise PlanFormatError("The plan is empty.")
    return text[: m.start()].strip(), tasks
