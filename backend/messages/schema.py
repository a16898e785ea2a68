"""The wire shape of a Message as JSON Schema: the source of the web UI's TypeScript types.

    python -m backend.actions.registry.wire > frontend/src/lib/message.schema.json

``make frontend`` runs it when the model, the kinds or the action registry change, then turns
the schema into ``frontend/src/lib/message.gen.ts`` (``npm run gen:types``); both files are
committed and ``tests/messages/test_wire_types.py`` fails when they differ from what is
generated. The enumerations of kinds and action names are given by the action registry
(:mod:`backend.actions.registry.wire`): this module knows only the run's own kinds.

The schema is the serialised form (every field is always sent). Enumerations carry their
member names (``x-enum-varnames``) so that the TypeScript side gets the same constants.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from backend.messages.message import Message


@dataclass(frozen=True)
class WireEnum:
    """An enumeration of wire strings, with the constant names the TypeScript side gets."""

    title: str
    description: str
    members: tuple[tuple[str, str], ...]  # (constant name, wire string)


def message_schema(enums: Iterable[WireEnum]) -> dict[str, Any]:
    """The Message's JSON Schema, with ``enums`` among its definitions."""
    schema = Message.model_json_schema(mode="serialization")
    defs: dict[str, Any] = schema.setdefault("$defs", {})
    for model in (schema, *defs.values()):
        _name_enums_drop_titles(model)
    for enum in enums:
        defs[enum.title] = _enum_schema(enum)
    return schema


def _name_enums_drop_titles(model: dict[str, Any]) -> None:
    """Field titles would become one TypeScript alias per field (``type Pid = string``); an
    inline enumeration is named after its model and field instead (``MessageStatus``)."""
    for name, prop in model.get("properties", {}).items():
        prop.pop("title", None)
        if "enum" in prop:
            prop["title"] = model["title"] + name.title().replace("_", "")


def _enum_schema(enum: WireEnum) -> dict[str, Any]:
    return {
        "title": enum.title,
        "description": enum.description,
        "type": "string",
        "enum": [value for _, value in enum.members],
        "x-enum-varnames": [name for name, _ in enum.members],
    }


def dumps(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"
