"""Prompt templates, rendered with StrictUndefined."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined

_DIR = Path(__file__).resolve().parent


@cache
def _env() -> Environment:
    env = Environment(
        loader=FileSystemLoader(_DIR),
        undefined=StrictUndefined,
        keep_trailing_newline=False,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    env.globals["tool_notes"] = []
    return env


def render(name: str, **values: Any) -> str:
    return _env().get_template(f"{name}.j2").render(**values).strip()
