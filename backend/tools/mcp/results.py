"""A tool call's outcome: plain text for the model (capped like command output) and
structured parts for the stream (text, images, resources)."""

from __future__ import annotations

import base64
import binascii
import json
import mimetypes
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from backend.runtime.base import OUTPUT_CAP, cap_text
from backend.tools.mcp.parts import (
    BinaryPart,
    McpPart,
    ResourceLinkPart,
    TextPart,
    TextResourcePart,
    part_dict,
)

if TYPE_CHECKING:
    import mcp_types as types

INLINE_DATA_MAX = 2 * 2**20  # base64 characters of an image kept in a part without a file

# a running call's progress, one line at a time ("40/100: copying files")
Progress = Callable[[str], Awaitable[None]]


@dataclass
class McpResult:
    status: str  # "success" | "failure"
    content: str  # what the model reads
    parts: list[dict[str, Any]] = field(default_factory=list)  # what the stream shows
    name: str = ""  # server__tool as called

    @property
    def ok(self) -> bool:
        return self.status == "success"

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "content": self.content, "parts": self.parts}


def failure(message: str, name: str = "") -> McpResult:
    parts = [part_dict(TextPart(type="text", text=message))]
    return McpResult("failure", cap_text(message), parts, name)


def progress_line(done: float, total: float | None, message: str | None) -> str:
    """A progress notification as one line: "3/10: copying", "40%", "step 2"."""
    amount = f"{done:g}/{total:g}" if total else f"{done:g}"
    return f"{amount}: {message}\n" if message else f"{amount}\n"


def convert(
    result: types.CallToolResult,
    name: str,
    files_dir: Path | None = None,
    workspace: Path | None = None,
) -> McpResult:
    """CallToolResult -> McpResult. Images and binary resources are written to files_dir
    when given (the part's `filepath` then names the file, relative to ``workspace`` when
    that holds it, as the model and the stream see it), else kept inline as base64 up to a
    size."""
    import mcp_types as types  # the SDK is loaded by then: a result came from a connection

    texts: list[str] = []
    parts: list[McpPart] = []
    for block in result.content:
        if isinstance(block, types.TextContent):
            texts.append(block.text)
            parts.append(TextPart(type="text", text=cap_text(block.text)))
        elif isinstance(block, types.ImageContent | types.AudioContent):
            binary = _binary(block.type, block.data, block.mime_type, name, files_dir, workspace)
            parts.append(binary)
            texts.append(_note(binary))
        elif isinstance(block, types.EmbeddedResource):
            res = block.resource
            if isinstance(res, types.TextResourceContents):
                texts.append(res.text)
                parts.append(
                    TextResourcePart(
                        type="resource",
                        uri=str(res.uri),
                        mime_type=res.mime_type,
                        text=cap_text(res.text),
                    )
                )
            else:
                binary = _binary("resource", res.blob, res.mime_type, name, files_dir, workspace)
                binary.uri = str(res.uri)
                parts.append(binary)
                texts.append(_note(binary))
        elif isinstance(block, types.ResourceLink):
            parts.append(
                ResourceLinkPart(
                    type="resource_link",
                    uri=str(block.uri),
                    name=block.name,
                    mime_type=block.mime_type,
                )
            )
            texts.append(f"[resource link {block.uri} ({block.name})]")
    if not texts and result.structured_content is not None:
        text = json.dumps(result.structured_content, ensure_ascii=False)
        texts.append(text)
        parts.append(TextPart(type="text", text=cap_text(text)))
    body = "\n".join(texts)
    sent = [part_dict(p) for p in parts]
    if result.is_error:
        content = f"The tool {name} reported an error: {body or '(no message)'}"
        return McpResult("failure", cap_text(content, OUTPUT_CAP), sent, name)
    return McpResult("success", cap_text(body or "(the tool returned nothing)"), sent, name)


def _binary(
    kind: Literal["image", "audio", "resource"],
    data: str,
    mime_type: str | None,
    name: str,
    files_dir: Path | None,
    workspace: Path | None,
) -> BinaryPart:
    part = BinaryPart(type=kind, mime_type=mime_type)
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        part.error = "the server sent data that is not base64"
        return part
    part.size = len(raw)
    if files_dir is not None:
        ext = mimetypes.guess_extension(mime_type or "") or ".bin"
        path = files_dir / f"mcp_{name}_{secrets.token_hex(4)}{ext}"
        files_dir.mkdir(parents=True, exist_ok=True)
        path.write_bytes(raw)
        if workspace is not None and path.is_relative_to(workspace):
            part.filepath = path.relative_to(workspace).as_posix()
        else:
            part.filepath = str(path)
    elif len(data) <= INLINE_DATA_MAX:
        part.data = data
    else:
        part.error = f"too large to keep inline ({len(raw)} bytes)"
    return part


def _note(part: BinaryPart) -> str:
    what = f"[{part.type} {part.mime_type or 'unknown type'}"
    if part.size is not None:
        what += f", {part.size} bytes"
    if part.filepath is not None:
        what += f", saved as {part.filepath}"
    if part.error is not None:
        what += f": {part.error}"
    return what + "]"
