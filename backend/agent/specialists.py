"""Specialists: the kinds of goal a run routes to (task type, whether it needs tools, an
optional model), built in or read from SPECIALISTS_FILE."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml


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
