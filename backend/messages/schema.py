"""The wire shape of a Message as JSON Schema: the source of the web UI's TypeScript types.

    python -m backend.messages.schema > frontend/src/lib/message.schema.json

``make frontend`` runs it when the model or the kinds change, then turns the schema into
``frontend/src/lib/message.gen.ts`` (``npm run gen:types``); both files are committed and
``tests/messages/test_wire_types.py`` fails when they differ from what this module gives.

The schema is the serialised form (every field is always sent). Enumerations carry their
member names (``x-enum-varnames``) so that the TypeScript side gets the same constants.
"""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from typing import Any

from backend.messages.kinds import ActionType, MessageKind
from backend.messages.message import Message

ENUMS: tuple[type[StrEnum], ...] = (MessageKind, ActionType)


def wire_schema() -> dict[str, Any]:
    schema = Message.model_json_schema(mode="serialization")
    defs: dict[str, Any] = schema.setdefault("$defs", {})
    for model in (schema, *defs.values()):
        _name_enums_drop_titles(model)
    for enum in ENUMS:
        defs[enum.__name__] = _enum_schema(enum)
    return schema


def _name_enums_drop_titles(model: dict[str, Any]) -> None:
    """Field titles would become one TypeScript alias per field (``type Pid = string``); an
    inline enumeration is named after its model and field instead (``MessageStatus``)."""
    for name, prop in model.get("properties", {}).items():
        prop.pop("title", None)
        if "enum" in prop:
            prop["title"] = model["title"] + name.title().replace("_", "")


def _enum_schema(enum: type[StrEnum]) -> dict[str, Any]:
    return {
        "title": enum.__name__,
        "description": (enum.__doc__ or "").strip(),
        "type": "string",
        "enum": [member.value for member in enum],
        "x-enum-varnames": [member.name for member in enum],
    }


def dumps(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def main() -> None:
    sys.stdout.write(dumps(wire_schema()))


if __name__ == "__main__":
    main()
