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
from typing import Any

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


def clean_raw(value: str, opener_indent: str = "") -> str:
    """A raw param (file content, command, message). ``opener_indent``: the indentation of
    the line its opening tag starts (pretty-printed XML), when the tag starts its line."""
    inside = unwrap_cdata(value)
    if inside is not None:
        return _drop_leading_newline(inside)  # `<![CDATA[\n#!/bin/sh…` keeps the shebang first
    on_own_lines = value.startswith(("\n", "\r\n"))
    value = _drop_leading_newline(value)
    m = _TRAILING_INDENT.search(value)
    if m:
        indent = m.group()[1:]
        value = dedent_by(value[: m.start() + 1], indent)
    elif opener_indent and on_own_lines:
        # `  <content>\n    text…</content>`: the whole block sits under its indented tag
        value = dedent_by(value, opener_indent)
    return decode_entities(value)


def dedent_by(value: str, indent: str) -> str:
    """Content pretty-printed with the XML's indentation: when every non-blank line starts
    with ``indent`` (the tags' indentation), the indentation all of them share (that much
    or more) is taken off every line, as a block: relative indentation is kept."""
    lines = value.split("\n")
    filled = [line for line in lines if line.strip()]
    if not filled or any(not line.startswith(indent) for line in filled):
        return value
    common = _shared_prefix([line[: len(line) - len(line.lstrip(" \t"))] for line in filled])
    out = []
    for line in lines:
        if line.startswith(common):
            out.append(line[len(common) :])
        else:  # a blank line with less whitespace
            out.append(line.lstrip(" \t") if not line.strip() else line)
    return "\n".join(out)


def _shared_prefix(texts: list[str]) -> str:
    first, last = min(texts), max(texts)
    k = 0
    while k < len(first) and first[k] == last[k]:
        k += 1
    return first[:k]


def clean_plain(value: str) -> str:
    """A short param (path, cwd): trimmed."""
    inside = unwrap_cdata(value)
    if inside is not None:
        return inside.strip()
    return decode_entities(value.strip())


# ---------------------------------------------------------------- real-reply policies

_SURROGATE = re.compile("[\ud800-\udfff]")
_FENCE_OPEN = re.compile(r"\A[ \t]*(`{3,}|~{3,})[ \t]*[\w+#.-]*[ \t]*\r?\n")
MARKDOWN_SUFFIXES = (".md", ".markdown", ".mdx", ".mdown", ".mkd", ".rmd", ".qmd")


def has_surrogates(value: str) -> bool:
    """True when the text holds UTF-16 surrogates (never valid in UTF-8 text)."""
    return not value.isascii() and _SURROGATE.search(value) is not None


def join_surrogates(value: str) -> str | None:
    """Pairs of surrogates become the character they encode; None when a lone surrogate
    (e.g. from a JSON escape like `\\ud800`) is left: such text cannot be written."""
    if not has_surrogates(value):
        return value
    try:
        return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le")
    except UnicodeDecodeError:
        return None


def scrub(value: str) -> str:
    """Text safe to store and show: surrogate pairs joined, lone surrogates and NUL
    characters (PostgreSQL text cannot hold them) replaced by U+FFFD. Valid text is
    returned unchanged."""
    if "\x00" in value:
        value = value.replace("\x00", "\ufffd")
    if not has_surrogates(value):
        return value
    return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def scrub_data(value: Any) -> Any:
    """:func:`scrub` applied to every string of a JSON value (an action's meta.json)."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, list):
        return [scrub_data(v) for v in value]
    if isinstance(value, dict):
        return {k: scrub_data(v) for k, v in value.items()}
    return value


def trim_path(value: str) -> str:
    """`src/app.py` written in backticks or with spaces around it is src/app.py."""
    value = value.strip()
    while len(value) >= 2 and value[0] == value[-1] == "`":
        value = value[1:-1].strip()
    return value


def strip_wrapping_fence(content: str, path: str) -> str | None:
    """The inside of a Markdown fence that wraps a whole non-Markdown file
    (```` ```python … ``` ```` into a .py), else None. Markdown files keep their fences."""
    if path.lower().endswith(MARKDOWN_SUFFIXES):
        return None
    m = _FENCE_OPEN.match(content)
    if m is None:
        return None
    fence = m.group(1)
    body = content[m.end() :].rstrip()
    cut = body.rfind("\n")
    last = body[cut + 1 :].strip()
    if len(last) < len(fence) or last.strip(fence[0]):
        return None
    return body[: cut + 1] if cut >= 0 else ""
