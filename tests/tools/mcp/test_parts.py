"""An MCP result's parts are one set of models (backend/tools/mcp/parts.py): what a real
server's answer becomes is exactly their dump, and the saved file's field has one name,
``filepath``, in Python, in docs/api.md and in the web UI's generated types."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, TypeAdapter

from backend.tools.mcp.manager import McpManager
from backend.tools.mcp.parts import (
    BinaryPart,
    McpPart,
    ResourceLinkPart,
    TextPart,
    TextResourcePart,
    part_dict,
)
from tests.support.mcp import stdio

ROOT = Path(__file__).resolve().parents[3]
PARTS: tuple[type[BaseModel], ...] = (TextPart, BinaryPart, TextResourcePart, ResourceLinkPart)
SENT = TypeAdapter(list[McpPart])


def _docs_parts() -> list[list[str]]:
    """The field names of each part shape the docs' `mcp_tool` row lists."""
    api = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    row = next(line for line in api.splitlines() if '"parts": [' in line)
    start = row.index('"parts": [')
    listed = row[start : row.index("]}]", start)]
    shapes = re.findall(r"\{([^{}]*)\}", listed)
    # `"type": "image" \| "audio"`: the type's values are no field names
    kinds = r'"type": "\w+"(?: \\?\| "\w+")*'
    return [["type", *re.findall(r'"(\w+)"', re.sub(kinds, "", s))] for s in shapes]


def test_the_docs_list_each_part_with_the_models_field_names() -> None:
    shapes = _docs_parts()
    assert len(shapes) == 5, shapes
    names = {name for shape in shapes for name in shape}
    fields = {name for model in PARTS for name in model.model_fields}
    assert names <= fields, names - fields
    # a saved image or binary resource names its file `filepath`, nothing else
    saved = [shape for shape in shapes if "size" in shape]
    assert saved and all("filepath" in shape for shape in saved)
    assert "filepath" in BinaryPart.model_fields and "file" not in BinaryPart.model_fields


def test_the_generated_typescript_names_the_saved_file_filepath() -> None:
    # declared once, where both the API's and the messages' types take it from
    generated = (ROOT / "frontend" / "src" / "lib" / "message.gen.ts").read_text(encoding="utf-8")
    binary = generated[generated.index("export interface BinaryPart {") :]
    binary = binary[: binary.index("}")]
    assert "  filepath?: string | null" in binary
    assert re.search(r"^\s+file\??:", binary, re.M) is None


async def test_a_real_servers_parts_are_exactly_the_models_dump(
    make_manager: Callable[..., McpManager], tmp_path: Path
) -> None:
    manager = make_manager({"calc": stdio("tools_server.py")})
    results = [
        await manager.call("calc__report", "{}", files_dir=tmp_path, workspace=tmp_path),
        await manager.call("calc__image", "{}", files_dir=tmp_path, workspace=tmp_path),
        await manager.call("calc__image", "{}"),  # no folder: kept inline
    ]
    sent: list[dict[str, Any]] = [part for result in results for part in result.parts]
    parts = SENT.validate_python(sent, strict=True)
    assert [part_dict(p) for p in parts] == sent
    # each kind of part came back, in the model the docs name
    assert {type(p) for p in parts} == set(PARTS)
    saved = [p for p in parts if isinstance(p, BinaryPart) and p.filepath]
    assert saved and all((tmp_path / p.filepath).is_file() for p in saved if p.filepath)
