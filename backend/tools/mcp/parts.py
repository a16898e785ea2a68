"""The parts of an MCP tool's result, as the stream carries them in an ``mcp_tool``
message's ``meta.json`` (docs/api.md "Tools"): one model per kind of part.

A saved file is named by ``filepath`` (relative to the workspace) in every place: here, in
docs/api.md and in the web UI's generated types (backend/api/wire_types.py -> api.gen.ts).
Parts are sent as ``model_dump(exclude_unset=True)``: a field is present when it was set,
in the order of the fields below.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel


class TextPart(BaseModel):
    type: Literal["text"]
    text: str


class BinaryPart(BaseModel):
    """An image, audio or binary resource: saved as a file (``filepath``), kept inline as
    base64 (``data``, without a folder to save it in), or not kept (``error``)."""

    type: Literal["image", "audio", "resource"]
    mime_type: str | None
    size: int | None = None
    filepath: str | None = None
    data: str | None = None
    error: str | None = None
    uri: str | None = None


class TextResourcePart(BaseModel):
    type: Literal["resource"]
    uri: str
    mime_type: str | None
    text: str


class ResourceLinkPart(BaseModel):
    type: Literal["resource_link"]
    uri: str
    name: str
    mime_type: str | None


McpPart = TextPart | BinaryPart | TextResourcePart | ResourceLinkPart


class McpCall(BaseModel):
    """The ``meta.json[0]`` of a finished ``mcp_tool`` message."""

    name: str
    arguments: Any
    parts: list[McpPart]


def part_dict(part: McpPart) -> dict[str, Any]:
    """A part as the stream carries it."""
    return part.model_dump(exclude_unset=True)
