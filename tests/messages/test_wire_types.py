"""The web UI's message types are what the Python model generates (no drift).

The committed TypeScript (frontend/src/lib/message.gen.ts) is what the generator
(frontend/scripts/gen-types.mjs, json-schema-to-typescript) makes of the JSON Schema that
backend/actions/registry/wire.py gives (the Message model with the registry's kinds), and the
schema it carries (``messageSchema``, what the UI draws a generic card from) is that schema.
Fix a failure with `make frontend-types` and commit the file.

The TypeScript half needs node and frontend/node_modules (CI installs them before
`make test`); without them it skips, unless REQUIRE_BROWSER=1 (the UI's CI), where it fails.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from backend.actions import builtin_registry
from backend.actions.registry.wire import wire_schema
from backend.messages.kinds import MessageKind
from backend.messages.schema import dumps
from tests.support.wire import (
    FRONTEND,
    GENERATOR,
    MESSAGE_TYPES,
    committed_message_schema,
    embedded_schema,
)

REGISTRY = builtin_registry()
TYPES = MESSAGE_TYPES
FIX = "regenerate with `make frontend-types` and commit"


def test_the_schema_the_committed_types_carry_is_what_the_python_model_gives() -> None:
    assert committed_message_schema() == wire_schema(), FIX


def test_a_file_that_carries_no_schema_is_named() -> None:
    with pytest.raises(ValueError, match="carries no messageSchema"):
        embedded_schema("export type MessageRole = 'user'\n")


def test_the_schema_names_every_kind_and_the_fields_the_wire_always_carries() -> None:
    schema = wire_schema()
    kinds = schema["$defs"]["MessageKind"]
    assert set(kinds["enum"]) == {k.value for k in MessageKind} | {d.kind for d in REGISTRY.defs()}
    assert len(kinds["enum"]) == len(set(kinds["enum"]))
    assert kinds["x-enum-varnames"] == [k.upper() for k in kinds["enum"]]
    names = schema["$defs"]["ActionType"]
    assert names["enum"] == [d.name for d in REGISTRY.defs()]
    assert set(schema["required"]) == set(schema["properties"])
    meta = schema["$defs"]["Meta"]
    assert "json" in meta["properties"]  # the wire name, not the Python attribute json_
    assert set(meta["required"]) == set(meta["properties"])


def _node_missing() -> str | None:
    if shutil.which("node") is None:
        return "node is not installed"
    if not (FRONTEND / "node_modules" / "json-schema-to-typescript").is_dir():
        return "frontend/node_modules is not installed (make frontend)"
    return None


def test_the_committed_typescript_is_what_the_generator_makes_of_the_model(
    tmp_path: Path,
) -> None:
    reason = _node_missing()
    if reason:
        if os.environ.get("REQUIRE_BROWSER") == "1":
            pytest.fail(f"REQUIRE_BROWSER=1 but {reason}")
        pytest.skip(reason)
    schema = tmp_path / "message.schema.json"
    schema.write_text(dumps(wire_schema()), encoding="utf-8")
    out = tmp_path / "message.gen.ts"
    command = ["node", str(GENERATOR), str(schema), str(out), "backend/actions/registry/wire.py"]
    command += ["--embed", "messageSchema"]
    subprocess.run(command, cwd=FRONTEND, check=True, timeout=120)
    generated = out.read_text(encoding="utf-8")
    assert TYPES.read_text(encoding="utf-8") == generated, FIX
    for kind in wire_schema()["$defs"]["MessageKind"]["enum"]:
        assert f"  {kind.upper()}: '{kind}'," in generated


def test_the_carried_schema_has_a_message_at_its_root() -> None:
    assert committed_message_schema()["title"] == "Message"
