"""What people see of paths: the server's own workspace folder never shows in a message."""

from __future__ import annotations

import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Any


@lru_cache(maxsize=256)
def _pattern(workspace: str) -> re.Pattern[str] | None:
    forms = {workspace, os.path.realpath(workspace)}
    forms = {f.rstrip("/") for f in forms if f.strip("/")}
    if not forms:
        return None
    alts = "|".join(re.escape(f) for f in sorted(forms, key=len, reverse=True))
    # the folder itself, or the folder followed by a path inside it
    return re.compile(rf"(?:{alts})(?:/+|(?![\w.-]))")


def relative_paths(text: str, workspace: Path) -> str:
    """Replace the absolute workspace folder in ``text`` with the workspace-relative form:
    ``<workspace>/src/a.py`` becomes ``src/a.py`` and ``<workspace>`` alone becomes ``.``."""
    if not text:
        return text
    folder = str(workspace)
    if not any(f and f in text for f in _needles(folder)):
        return text  # the usual case: no pattern compiled for a run whose text names none
    pattern = _pattern(folder)
    if pattern is None:
        return text
    return pattern.sub(lambda m: "" if m.group(0).endswith("/") else ".", text)


@lru_cache(maxsize=256)
def _needles(workspace: str) -> tuple[str, ...]:
    return tuple({workspace.rstrip("/"), os.path.realpath(workspace).rstrip("/")})


def relative_paths_in(value: Any, workspace: Path) -> Any:
    """``relative_paths`` on every string inside ``value`` (a message's meta.json: lists,
    dicts, strings), keeping its shape."""
    if isinstance(value, str):
        return relative_paths(value, workspace)
    if isinstance(value, list):
        return [relative_paths_in(v, workspace) for v in value]
    if isinstance(value, dict):
        return {k: relative_paths_in(v, workspace) for k, v in value.items()}
    return value
