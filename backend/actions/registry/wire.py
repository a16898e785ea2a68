"""The wire's enumerations, made from the action registry: the message kinds (the run's own,
:class:`~backend.messages.kinds.MessageKind`, then every action's stream kind) and the action
names. The web UI's TypeScript types are generated from them (``make frontend-types`` writes
this schema to a temporary file and makes frontend/src/lib/message.gen.ts of it):

    python -m backend.actions.registry.wire > message.schema.json

A new action in the registry is a new member of both with nothing else edited (its kind, when
it is a new one, and its name); tests/messages/test_wire_types.py fails until the committed
file is regenerated.
"""

from __future__ import annotations

import sys
from typing import Any

from pydantic import BaseModel

from backend.actions.registry import builtin_registry
from backend.actions.registry.core import Registry
from backend.messages.kinds import PAYLOADS, MessageKind
from backend.messages.schema import WireEnum, dumps, message_schema

ACTION_TYPE_DOC = "What the model may ask for: the action's name in its reply (docs/tools.md)."


def message_kinds(registry: Registry | None = None) -> WireEnum:
    """Every ``meta.action_type`` on the wire: the run's own kinds, then the actions' (in
    prompt order, each once)."""
    registry = registry or builtin_registry()
    members = [(kind.name, kind.value) for kind in MessageKind]
    own = {kind.value for kind in MessageKind}
    members += [(kind.upper(), kind) for kind in registry.kinds() if kind not in own]
    return WireEnum("MessageKind", (MessageKind.__doc__ or "").strip(), tuple(members))


def action_types(registry: Registry | None = None) -> WireEnum:
    """Every registered action's name, in prompt order."""
    registry = registry or builtin_registry()
    names = tuple((d.name.upper(), d.name) for d in registry.defs())
    return WireEnum("ActionType", ACTION_TYPE_DOC, names)


def payloads(registry: Registry | None = None) -> dict[str, tuple[type[BaseModel], ...]]:
    """What each kind carries in meta.json: the run's own kinds' models
    (:data:`~backend.messages.kinds.PAYLOADS`), then each action kind's (its definition's
    ``payload``)."""
    registry = registry or builtin_registry()
    out: dict[str, tuple[type[BaseModel], ...]] = {k.value: m for k, m in PAYLOADS.items()}
    for kind in registry.kinds():
        out[kind] = registry.payload_of(kind) or out.get(kind, ())
    return out


def wire_schema(registry: Registry | None = None) -> dict[str, Any]:
    """The Message's JSON Schema with both enumerations and the meta.json payloads (of
    ``registry``'s actions; None: the builtin ones)."""
    enums = (message_kinds(registry), action_types(registry))
    return message_schema(enums, payloads(registry))


def main() -> None:
    sys.stdout.write(dumps(wire_schema()))


if __name__ == "__main__":
    main()
