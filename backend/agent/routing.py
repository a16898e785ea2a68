"""Routing: keywords first (deterministic, no model call), then the `route` stage."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from backend.agent.prompts import render
from backend.agent.specialists import DEFAULT_AGENT, DEFAULT_CHAT, Specialist
from backend.llm.base import LLMConfigError, LLMError

if TYPE_CHECKING:
    from backend.agent.context import RunContext


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
    if ctx.state.mode == "chat":
        return match_keywords(
            ctx.state.goal, tuple(s for s in specialists if not s.needs_tools)
        ) or (DEFAULT_CHAT)
    hit = match_keywords(ctx.state.goal, specialists)
    if ctx.state.mode == "agent":
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
                {"role": "user", "content": ctx.state.goal},
            ],
        )
    except LLMConfigError:
        raise
    except LLMError:
        return DEFAULT_AGENT  # routing is best effort: treat the goal as needing tools
    return parse_route_reply(completion.text, specialists) or DEFAULT_AGENT
