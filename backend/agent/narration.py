"""The prose a model writes before its machine-readable part, cut incrementally.

A thinking reply reads "The script failed with KeyError; I'll fix the column name." and
then XML actions; a plan reply reads "I'll do it in two steps." and then a JSON array or
Markdown headings. :class:`ProseCut` passes the prose through as it streams and stops for
good at the first sign of the machine part, so the user sees the agent's words live and
never half an action. ``<think>`` blocks are skipped (they are reasoning, published apart).
The same cut over the whole reply gives the stored text, so live and stored agree.
"""

from __future__ import annotations

import re

from backend.messages.kinds import MessageKind
from backend.messages.message import Message

PROSE_CAP = 4000  # characters of narration at most (the rest of a long reply is not words)
THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"

# what ends the prose of a thinking reply: tags, fences, a JSON tool call
ACTION_LINE_STARTS = ("{", "[")
# what ends the prose of a plan: a JSON array, a fence, Markdown headings or lists
PLAN_LINE_STARTS = ("[", "{", "#", "- ", "* ", "1.", "1)")


class ProseCut:
    def __init__(self, line_starts: tuple[str, ...] = ACTION_LINE_STARTS) -> None:
        self._line_starts = line_starts
        self._text = ""
        self._pos = 0  # everything before it was decided (released or skipped)
        self._in_think = False
        self.done = False
        self.prose = ""  # everything released so far

    def feed(self, chunk: str, final: bool = False) -> str:
        """Append ``chunk``; return the prose it releases (may be empty). ``final``: the
        reply is complete, so nothing is held back waiting for more text."""
        if self.done:
            return ""
        self._text += chunk
        released = self._scan(final)
        if len(self.prose) + len(released) >= PROSE_CAP:  # words, not a whole reply
            released = released[: max(0, PROSE_CAP - len(self.prose))]
            self.done = True
        if final:
            self.done = True
        self.prose += released
        return released

    def _scan(self, final: bool) -> str:
        text = self._text
        n = len(text)
        out: list[str] = []
        room = PROSE_CAP - len(self.prose)
        i = self._pos
        while i < n and room > 0:
            if self._in_think:
                end = text.find(THINK_CLOSE, i)
                if end < 0:
                    i = n if final else max(i, n - len(THINK_CLOSE) + 1)
                    break
                i = end + len(THINK_CLOSE)
                self._in_think = False
                continue
            if i == 0 or text[i - 1] == "\n":
                head = text[i : i + 64].lstrip(" \t")
                if not final and len(head) < 2 and "\n" not in head:
                    break  # too little to tell
                if head.startswith(self._line_starts):
                    self.done = True
                    break
            # plain prose up to the next character that may start something else
            limit = min(n, i + room)
            found = _CANDIDATE.search(text, i, limit)
            j = found.start() if found else limit
            if j > i:
                out.append(text[i:j])
                room -= j - i
                i = j
                continue
            c = text[i]
            if c == "<":
                if text.startswith(THINK_OPEN, i):
                    self._in_think = True
                    i += len(THINK_OPEN)
                    continue
                if not final and THINK_OPEN.startswith(text[i : i + len(THINK_OPEN)]):
                    break  # could still become <think>
                following = text[i + 1] if i + 1 < n else ""
                if following.isalpha() or (following and following in "/!?_"):
                    self.done = True
                    break
            elif c == "`":
                if text.startswith("```", i):
                    self.done = True
                    break
                if not final and "```".startswith(text[i : i + 3]):
                    break  # could still become a fence
            out.append(c)
            room -= 1
            i += 1
        self._pos = i
        return "".join(out)


_CANDIDATE = re.compile(r"[<`\n]")


def prose_of(text: str, line_starts: tuple[str, ...] = ACTION_LINE_STARTS) -> str:
    """The leading prose of a whole reply (the stored twin of what :class:`ProseCut` streams)."""
    cut = ProseCut(line_starts)
    cut.feed(text, final=True)
    return cut.prose.strip()


NARRATION = "narration"  # Message.type of a `thinking` message holding the agent's words


def narration_message(words: str, task_id: str | None, uuid: str) -> Message:
    """The agent's words between its actions: a `thinking` message of type `narration`
    (reasoning from ``<think>`` stays a plain `thinking` message)."""
    msg = Message.build(MessageKind.THINKING, words, task_id=task_id, uuid=uuid)
    msg.type = NARRATION
    return msg
