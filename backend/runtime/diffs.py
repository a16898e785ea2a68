"""What an edit changed, as the unified diff its card and `planact run` show."""

from __future__ import annotations

import difflib
import re

CONTEXT = 3  # unchanged lines shown around a change
DIFF_CAP = 20_000  # characters of a diff kept (an edit may replace a lot)

_HUNK = re.compile(r"^@@ -(\d+)(,\d+)? \+(\d+)(,\d+)? @@")


def _line_start(data: bytes, at: int, back: int) -> int:
    """Where the line ``back`` lines above the one holding ``at`` starts."""
    start = data.rfind(b"\n", 0, at) + 1
    for _ in range(back):
        if start == 0:
            break
        start = data.rfind(b"\n", 0, start - 1) + 1
    return start


def _line_end(data: bytes, at: int, forward: int) -> int:
    """Where the line ``forward`` lines below the one ending ``at`` ends (its newline kept)."""
    end = at
    for _ in range(forward + 1):
        nl = data.find(b"\n", end)
        if nl < 0:
            return len(data)
        end = nl + 1
    return end


def edit_diff(path: str, data: bytes, at: int, old_len: int, new: bytes) -> str:
    """The unified diff of replacing ``data[at:at + old_len]`` by ``new`` in the file
    ``path``, with real line numbers and a few lines of context; capped."""
    start = _line_start(data, at, CONTEXT)
    # the old text may end mid-line or with its newline: context starts after its line
    old_end = at + old_len
    tail_from = old_end - 1 if old_len and data[old_end - 1 : old_end] == b"\n" else old_end
    end = _line_end(data, tail_from, CONTEXT)
    before = data[start:end].decode("utf-8", "replace")
    after = (data[start:at] + new + data[old_end:end]).decode("utf-8", "replace")
    first = data.count(b"\n", 0, start)  # lines above the shown region
    lines = list(
        difflib.unified_diff(
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            f"a/{path}",
            f"b/{path}",
            n=CONTEXT,
        )
    )
    out: list[str] = []
    for line in lines:
        m = _HUNK.match(line)
        if m:
            a, b = int(m.group(1)) + first, int(m.group(3)) + first
            line = f"@@ -{a}{m.group(2) or ''} +{b}{m.group(4) or ''} @@\n"
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    text = "".join(out)
    if len(text) > DIFF_CAP:
        cut = text.rfind("\n", 0, DIFF_CAP) + 1
        text = text[:cut] + f"[... {len(text) - cut} more characters of the diff not shown ...]\n"
    return text
