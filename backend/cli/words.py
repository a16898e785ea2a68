"""What `planact run` says in people's words: the goal, approvals and answers as what happened
(not as a program's ok/FAIL), and a command shown whole before it is approved, its whitespace
and line count made visible (the same rules as the web UI's approval card)."""

from __future__ import annotations

import re

from backend.messages.kinds import MessageKind
from backend.messages.message import Message

# the server's own words for a wait that ended without the person (backend/waits/answers.py,
# backend/agent/ending.py); a person's reason is matched only when it starts like them
TIMED_OUT = re.compile(
    r"^(nobody (approved|answered) it within|timed out|no answer within)|\(APPROVAL_TIMEOUT\)",
    re.IGNORECASE,
)
STOPPED = re.compile(r"^(stopped before it finished|the run was stopped)", re.IGNORECASE)
NO_REASON = "Rejected (no reason given)."


def person_line(msg: Message) -> str | None:
    """The progress line of the goal, an approval or a question, or None for other kinds."""
    kind = msg.meta.action_type
    text = msg.content.strip()
    if kind == MessageKind.QUESTION:
        return f"[goal] {_indent(text)}"
    if kind == MessageKind.APPROVAL:
        if msg.status == "running":
            return f"[waiting for your approval] {_indent(text)}"
        if msg.status == "success":
            rest = text.removeprefix("Approved").lstrip(",").strip()
            return "[approval] you approved it" + (f", {rest}" if rest else "")
        if TIMED_OUT.search(text) or STOPPED.search(text):
            return f"[approval] not approved: {_indent(text)}"
        if text == NO_REASON:
            return "[approval] you rejected it (no reason given)"
        return f"[approval] you rejected it: {_indent(text)}"
    if kind == MessageKind.ASK_USER:
        if msg.status == "running":
            return f"[the agent asks] {_indent(text)}"
        if msg.status == "success":
            return f"[your answer] {_indent(text)}"
        return f"[question] not answered: {_indent(text)}"
    return None


def _indent(text: str) -> str:
    return text.replace("\n", "\n    ")


SPACE_RUN = 3  # this many spaces in a row (or any at a line's end) are counted aloud
BLANK_RUN = 3  # this many empty lines in a row are folded into one row
# characters that show as nothing (or as another) in a terminal: named, never hidden
INVISIBLE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u00a0\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180e"
    "\u2000-\u200f\u2028-\u202f\u205f-\u206f\u3000\u3164\ufe00-\ufe0f\ufeff\uffa0"
    "\ufff9-\ufffb]"
)


def _plural(n: int, one: str) -> str:
    return f"{n:,} {one}" + ("" if n == 1 else "s")


def _mark(ch: str, count: int) -> str:
    if ch == " ":
        name = _plural(count, "space")
    elif ch == "\t":
        name = _plural(count, "tab")
    else:
        code = "CR" if ch == "\r" else f"U+{ord(ch):04X}"
        name = code if count == 1 else f"{count}x {code}"
    return f"[{name}]"


def _visible(line: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(line):
        ch = line[i]
        odd = ch in "\t\r" or INVISIBLE.match(ch) is not None
        if ch != " " and not odd:
            out.append(ch)
            i += 1
            continue
        j = i
        while j < len(line) and line[j] == ch:
            j += 1
        trailing = not line[j:].strip()
        if ch == " " and j - i < SPACE_RUN and not trailing:
            out.append(line[i:j])
        else:
            out.append(_mark(ch, j - i))
        i = j
    return "".join(out)


def line_count(text: str) -> int:
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def show_command(command: str) -> str:
    """The command whole, numbered when it has several lines: runs of spaces, tabs, trailing
    whitespace and invisible characters named (``[400 spaces]``, ``[U+200B]``), runs of
    empty lines folded into one row that says how many. Nothing is left out."""
    lines = command.split("\n")
    final_newline = len(lines) > 1 and lines[-1] == ""
    if final_newline:
        lines.pop()
    rows: list[tuple[str, str]] = []
    i = 0
    while i < len(lines):
        if lines[i] == "":
            j = i
            while j < len(lines) and lines[j] == "":
                j += 1
            if j - i >= BLANK_RUN:
                rows.append((f"{i + 1}-{j}", f"[{j - i:,} empty lines]"))
                i = j
                continue
        rows.append((str(i + 1), _visible(lines[i])))
        i += 1
    if final_newline:
        rows[-1] = (rows[-1][0], rows[-1][1] + "[newline at end]")
    if len(rows) == 1:
        return f"$ {rows[0][1]}"
    width = max(len(n) for n, _ in rows)
    return "\n".join(
        f"{n:>{width}}  {'$ ' if k == 0 else '  '}{text}" for k, (n, text) in enumerate(rows)
    )


def size_line(command: str) -> str:
    return f"{_plural(line_count(command), 'line')}, {_plural(len(command), 'character')}"
