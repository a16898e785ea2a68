"""Turning the raw text between a parameter's tags into its value.

Rules (docs/dialects.md):
- a value that is wholly CDATA (after trimming the whitespace around it) is unwrapped, the
  `]]]]><![CDATA[>` split idiom included; the inside is never entity-decoded (for raw
  params one newline right after `<![CDATA[` is dropped, like the one after `<content>`);
- otherwise entities are decoded once, and only when the whole value is consistently
  escaped: at least one entity, every `&` starts an entity, and no raw `<`;
- raw params (file content, command, message) drop one leading newline and the closing
  tag's indentation (spaces/tabs after the last newline); the final newline is kept;
- other params (path, cwd) are stripped of surrounding whitespace;
- values are never type-converted: `null` stays the text `null`.
"""

from __future__ import annotations

import re

_ENTITY = re.compile(r"&(?:(lt|gt|amp|quot|apos)|#([0-9]{1,7})|#[xX]([0-9a-fA-F]{1,6}));")
_NAMED = {"lt": "<", "gt": ">", "amp": "&", "quot": '"', "apos": "'"}
_CDATA_OPEN = "<![CDATA["
_CDATA_CLOSE = "]]>"
_TRAILING_INDENT = re.compile(r"\n[ \t]+\Z")


def is_consistently_escaped(value: str) -> bool:
    """True when the value reads as XML-escaped text: has an entity, every `&` starts one,
    and there is no raw `<`."""
    if "&" not in value or "<" in value:
        return False
    n_amp = value.count("&")
    n_ent = sum(1 for _ in _ENTITY.finditer(value))
    return n_ent == n_amp


def _entity(m: re.Match[str]) -> str:
    if m.group(1):
        return _NAMED[m.group(1)]
    code = int(m.group(2), 10) if m.group(2) else int(m.group(3), 16)
    try:
        return chr(code)
    except (ValueError, OverflowError):
        return m.group(0)


def decode_entities(value: str) -> str:
    """Decode once, only when the whole value is consistently escaped."""
    if is_consistently_escaped(value):
        return _ENTITY.sub(_entity, value)
    return value


def parse_cdata_run(text: str, pos: int) -> tuple[str, int] | None:
    """At `pos` starts `<![CDATA[`: read adjacent CDATA sections (the split idiom
    `]]]]><![CDATA[>` continues one). Returns (inside, end) or None if unterminated."""
    parts: list[str] = []
    while text.startswith(_CDATA_OPEN, pos):
        end = text.find(_CDATA_CLOSE, pos + len(_CDATA_OPEN))
        if end < 0:
            return None
        parts.append(text[pos + len(_CDATA_OPEN) : end])
        pos = end + len(_CDATA_CLOSE)
    return "".join(parts), pos


def unwrap_cdata(value: str) -> str | None:
    """The inside if `value` is wholly CDATA (whitespace around it ignored), else None."""
    stripped = value.strip()
    if not (stripped.startswith(_CDATA_OPEN) and stripped.endswith(_CDATA_CLOSE)):
        return None
    run = parse_cdata_run(stripped, 0)
    if run is not None and run[1] == len(stripped):
        return run[0]
    # `]]>` inside without the split idiom: take the outer wrapper off as written
    return stripped[len(_CDATA_OPEN) : -len(_CDATA_CLOSE)]


def _drop_leading_newline(value: str) -> str:
    if value.startswith("\r\n"):
        return value[2:]
    if value.startswith("\n"):
        return value[1:]
    return value


def clean_raw(value: str) -> str:
    """A raw param (file content, command, message)."""
    inside = unwrap_cdata(value)
    if inside is not None:
        return _drop_leading_newline(inside)  # `<![CDATA[\n#!/bin/sh…` keeps the shebang first
    value = _drop_leading_newline(value)
    m = _TRAILING_INDENT.search(value)
    if m:
        value = value[: m.start() + 1]
    return decode_entities(value)


def clean_plain(value: str) -> str:
    """A short param (path, cwd): trimmed."""
    inside = unwrap_cdata(value)
    if inside is not None:
        return inside.strip()
    return decode_entities(value.strip())
