"""The generated message types (frontend/src/lib/message.gen.ts) and the JSON Schema they
carry (``messageSchema``, the file's last statement): what the committed file says, to hold
against what the Python model gives."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

FRONTEND = Path(__file__).resolve().parents[2] / "frontend"
MESSAGE_TYPES = FRONTEND / "src" / "lib" / "message.gen.ts"
GENERATOR = FRONTEND / "scripts" / "gen-types.mjs"
EMBEDDED = (
    "export const messageSchema: { $defs: Record<string, unknown>; [key: string]: unknown } = "
)


def embedded_schema(text: str) -> dict[str, Any]:
    """The schema a generated file carries (ValueError: it carries none)."""
    at = text.rfind("\n" + EMBEDDED)
    if at < 0:
        raise ValueError("the generated file carries no messageSchema")
    schema: dict[str, Any] = json.loads(text[at + 1 + len(EMBEDDED) :])
    return schema


def committed_message_schema() -> dict[str, Any]:
    return embedded_schema(MESSAGE_TYPES.read_text(encoding="utf-8"))
