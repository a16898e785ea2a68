"""The wire shape of a Message as JSON Schema: the source of the web UI's TypeScript types.

    python -m backend.actions.registry.wire > message.schema.json

``make frontend-types`` runs it (into a temporary file) when the model, the kinds or the
action registry change, then turns the schema into ``frontend/src/lib/message.gen.ts``, which
carries the schema too (``messageSchema``); that file is committed and
``tests/messages/test_wire_types.py`` fails when it differs from what is generated. The
enumerations of kinds and action names are given by the action registry
(:mod:`backend.actions.registry.wire`): this module knows only the run's own kinds.

The schema is the serialised form (every field is always sent). Enumerations carry their
member names (``x-enum-varnames``) so that the TypeScript side gets the same constants.
``meta.json`` is typed by the payload models (backend/messages/payloads.py): an item is a
``MetaItem`` (one of the models, or an unknown kind's object), and ``MetaPayloads`` maps each
kind to the models of its items (the web UI reads meta.json through it, lib/metajson.ts).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from backend.messages.message import Message

# an item of a kind this code does not know (a newer writer's): readers pass over it
UNKNOWN_ITEM: dict[str, Any] = {
    "title": "UnknownItem",
    "description": "An item of a kind the reader does not know: pass over it.",
    "type": "object",
    "additionalProperties": True,
}


@dataclass(frozen=True)
class WireEnum:
    """An enumeration of wire strings, with the constant names the TypeScript side gets."""

    title: str
    description: str
    members: tuple[tuple[str, str], ...]  # (constant name, wire string)


def message_schema(
    enums: Iterable[WireEnum], payloads: Mapping[str, tuple[type[BaseModel], ...]]
) -> dict[str, Any]:
    """The Message's JSON Schema, with ``enums`` among its definitions and ``meta.json``
    typed by ``payloads`` (a kind -> the models of its items, backend/messages/payloads.py):
    an item is one of the models (or an unknown kind's object), and ``MetaPayloads`` says
    which kind carries which."""
    schema = Message.model_json_schema(mode="serialization")
    defs: dict[str, Any] = schema.setdefault("$defs", {})
    models = list(dict.fromkeys(m for kind_models in payloads.values() for m in kind_models))
    refs, top = models_json_schema(
        [(m, "serialization") for m in models], ref_template="#/$defs/{model}"
    )
    defs.update(top.get("$defs", {}))
    for model in (schema, *defs.values()):
        _name_enums_drop_titles(model)
    for enum in enums:
        defs[enum.title] = _enum_schema(enum)
    defs[UNKNOWN_ITEM["title"]] = dict(UNKNOWN_ITEM)
    unknown = {"$ref": f"#/$defs/{UNKNOWN_ITEM['title']}"}
    defs["MetaItem"] = {
        "title": "MetaItem",
        "description": "An item of a message's meta.json: MetaPayloads says which kind "
        "carries which.",
        "anyOf": [*(refs[(m, "serialization")] for m in models), unknown],
    }
    defs["Meta"]["properties"]["json"]["items"] = {"$ref": "#/$defs/MetaItem"}
    defs["MetaPayloads"] = {
        "title": "MetaPayloads",
        "description": "What each kind carries in meta.json (a kind not named carries "
        "nothing): the run's own kinds (backend/messages/kinds.py) and each action's "
        "(its ActionDef.payload).",
        "type": "object",
        "properties": {
            kind: {"type": "array", "items": _one_of(refs, kind_models)}
            for kind, kind_models in payloads.items()
            if kind_models
        },
        "required": [kind for kind, kind_models in payloads.items() if kind_models],
    }
    return schema


def _one_of(refs: Mapping[Any, Any], models: tuple[type[BaseModel], ...]) -> dict[str, Any]:
    if len(models) == 1:
        return dict(refs[(models[0], "serialization")])
    return {"anyOf": [refs[(m, "serialization")] for m in models]}


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
