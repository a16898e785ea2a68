"""Routing: keywords first (deterministic, no model call), then the `route` stage."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from backend.agent.prompts import render
from backend.llm.base import LLMConfigError, LLMError

if TYPE_CHECKING:
    from backend.agent.context import RunContext


@dataclass(frozen=True)
class Specialist:
    task_type: str
    needs_tools: bool
    model: str | None = None
    keywords: tuple[str, ...] = field(default_factory=tuple)


BUILTIN: tuple[Specialist, ...] = (
    Specialist(
        "code_generation",
        True,
        keywords=(
            "script",
            "code",
            "python",
            "function",
            "program",
            "implement",
            "refactor",
            "debug",
            "unit test",
            "compile",
            "javascript",
            "typescript",
            "bash",
            "html",
        ),
    ),
    Specialist(
        "file_task",
        True,
        keywords=(
            "file",
            "save",
            "csv",
            "json",
            "write a",
            "create a",
            "generate a",
            "run ",
            "execute",
            "install",
            "download",
            "convert",
            "chart",
            "plot",
            "report",
        ),
    ),
    Specialist(
        "general_chat",
        False,
        keywords=(
            "what is",
            "what are",
            "explain",
            "who is",
            "who was",
            "why is",
            "why do",
            "how does",
            "define",
            "tell me about",
            "translate",
            "hello",
            "hi there",
        ),
    ),
)
DEFAULT_AGENT = Specialist("general_agent", True)
DEFAULT_CHAT = Specialist("general_chat", False)


class SpecialistsFileError(ValueError):
    pass


def load_specialists(path: Path | None) -> tuple[Specialist, ...]:
    if path is None:
        return BUILTIN
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise SpecialistsFileError(f"SPECIALISTS_FILE {path}: cannot be read: {exc}") from exc
    items = data.get("specialists") if isinstance(data, dict) else None
    if not isinstance(items, list) or not items:
        raise SpecialistsFileError(f"SPECIALISTS_FILE {path}: needs a 'specialists:' list")
    out: list[Specialist] = []
    for i, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("task_type"), str):
            raise SpecialistsFileError(f"SPECIALISTS_FILE {path}: entry {i} needs a task_type")
        keywords = item.get("keywords") or []
        if not isinstance(keywords, list) or not all(isinstance(k, str) for k in keywords):
            raise SpecialistsFileError(f"SPECIALISTS_FILE {path}: entry {i}: keywords is a list")
        model = item.get("model")
        out.append(
            Specialist(
                task_type=item["task_type"],
                needs_tools=bool(item.get("needs_tools", True)),
                model=str(model) if model else None,
                keywords=tuple(keywords),
            )
        )
    return tuple(out)


def match_keywords(goal: str, specialists: tuple[Specialist, ...]) -> Specialist | None:
    """First specialist, in list order, with a keyword found in the goal (case-insensitive,
    on word boundaries)."""
    text = goal.lower()
    for spec in specialists:
        for kw in spec.keywords:
            k = kw.lower().strip()
            if k and re.search(rf"(?<!\w){re.escape(k)}(?!\w)", text):
                return spec
    return None


def parse_route_reply(text: str, specialists: tuple[Specialist, ...]) -> Specialist | None:
    match = re.search(r"\{.*\}", text, re.S)
    if not match:
        return None
    try:
        data: Any = json.loads(match.group(0))
    except json.JSONDecodeError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("needs_tools"), bool):
        return None
    task_type = str(data.get("task_type") or "")
    for spec in specialists:
        if spec.task_type == task_type:
            return Specialist(spec.task_type, data["needs_tools"], spec.model, spec.keywords)
    return Specialist(task_type or "general", data["needs_tools"])


async def route(ctx: RunContext, specialists: tuple[Specialist, ...]) -> Specialist:
    if ctx.mode == "chat":
        return match_keywords(ctx.goal, tuple(s for s in specialists if not s.needs_tools)) or (
            DEFAULT_CHAT
        )
    hit = match_keywords(ctx.goal, specialists)
    if ctx.mode == "agent":
        if hit and hit.needs_tools:
            return hit
        return next((s for s in specialists if s.needs_tools), DEFAULT_AGENT)
    if hit:
        return hit
    try:
        completion = await ctx.call_model(
            "route",
            [
                {"role": "system", "content": render("route", specialists=specialists)},
                {"role": "user", "content": ctx.goal},
            ],
        )
    except LLMConfigError:
        raise
    except LLMError:
        return DEFAULT_AGENT  # routing is best effort: treat the goal as needing tools
    return parse_route_reply(completion.text, specialists) or DEFAULT_AGENT
