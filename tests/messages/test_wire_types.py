"""The web UI's message types are what the Python model generates (no drift).

The committed JSON Schema (frontend/src/lib/message.schema.json) must equal what
backend/actions/registry/wire.py gives (the Message model with the registry's kinds), and
the committed TypeScript (message.gen.ts) what the generator (frontend/scripts/gen-types.mjs,
json-schema-to-typescript) makes of it. Fix a failure with `make frontend-types` and commit
both files.

The TypeScript half needs node and frontend/node_modules (CI installs them before
`make test`); without them it skips, unless REQUIRE_BROWSER=1 (the UI's CI), where it fails.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from backend.actions import builtin_registry
from backend.actions.registry.wire import wire_schema
from backend.messages.kinds import MessageKind
from backend.messages.schema import dumps

REGISTRY = builtin_registry()

FRONTEND = Path(__file__).resolve().parents[2] / "frontend"
SCHEMA = FRONTEND / "src" / "lib" / "message.schema.json"
TYPES = FRONTEND / "src" / "lib" / "message.gen.ts"
GENERATOR = FRONTEND / "scripts" / "gen-types.mjs"
FIX = "regenerate with `make frontend-types` and commit"


def test_the_committed_schema_is_what_the_python_model_gives() -> None:
    assert SCHEMA.read_text(encoding="utf-8") == dumps(wire_schema()), FIX


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
    subprocess.run(
        ["node", str(GENERATOR), str(schema), str(out)], cwd=FRONTEND, check=True, timeout=120
    )
    generated = out.read_text(encoding="utf-8")
    assert TYPES.read_text(encoding="utf-8") == generated, FIX
    for kind in wire_schema()["$defs"]["MessageKind"]["enum"]:
        assert f"  {kind.upper()}: '{kind}'," in generated


def test_the_schema_file_is_valid_json_with_a_message_at_its_root() -> None:
    assert json.loads(SCHEMA.read_text(encoding="utf-8"))["title"] == "Message"
