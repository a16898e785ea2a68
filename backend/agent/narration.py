"""The prose a model writes before its machine-readable part, cut incrementally.

A thinking reply reads "The script failed with KeyError; I'll fix the column name." and
then XML actions; a plan reply reads "I'll do it in two steps." and then a JSON array or
Markdown headings. :class:`ProseCut` passes the prose through as it streams and stops for
good at the first sign of the machine part, so the user sees the agent's words live and
never half an action. Reasoning is skipped (it is published apart): ``<think>`` and the
other markers the action parser knows, and gpt-oss's harmony ``analysis`` messages; the
headers of harmony's other messages are not words either, and a vendor tool-call marker
(``<|tool_calls_section_begin|>``, a harmony header addressed ``to=``) ends the prose.
The same cut over the whole reply gives the stored text, so live and stored agree.
"""

from __future__ import annotations

import re

from backend.messages.kinds import MessageKind
from backend.messages.message import Message

PROSE_CAP = 4000  # characters of narration at most (the rest of a long reply is not words)
# reasoning blocks (backend/actions/scan_reasoning.py has the parser's side of them)
REASONING = (
    ("<think>", "</think>"),
    ("<thinking>", "</thinking>"),
    ("<reasoning>", "</reasoning>"),
    ("\u25c1think\u25b7", "\u25c1/think\u25b7"),
    ("<|START_THINKING|>", "<|END_THINKING|>"),
)
_LONGEST_CLOSE = max(len(close) for _, close in REASONING)
# harmony: a message header (the recipient may be in the role part), and message ends
_HARMONY_HEADER = re.compile(
    r"(?:<\|start\|>[^<>|]{0,60})?<\|channel\|>[ \t]*([\w-]+)[^<>|]{0,120}"
    r"(?:<\|constrain\|>[^<>|]{0,40})?<\|message\|>"
)
_HARMONY_STARTS = ("<|start|>", "<|channel|>")
_HARMONY_ENDS = ("<|end|>", "<|return|>", "<|call|>")
_HARMONY_END = re.compile(r"<\|(?:end|call|return)\|>")
_HEADER_MAX = 260  # characters a harmony header may take

# what ends the prose of a thinking reply: tags, fences, a JSON tool call
ACTION_LINE_STARTS = ("{", "[")
# what ends the prose of a plan: a JSON array, a fence, Markdown headings or lists
PLAN_LINE_STARTS = ("[", "{", "#", "- ", "* ", "1.", "1)")


class ProseCut:
    def __init__(self, line_starts: tuple[str, ...] = ACTION_LINE_STARTS) -> None:
        self._line_starts = line_starts
        self._text = ""
        self._pos = 0  # everything before it was decided (released or skipped)
        self._closer: re.Pattern[str] | None = None  # inside reasoning: what ends it
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
            if self._closer is not None:
                m = self._closer.search(text, i)
                if m is None:
                    i = n if final else max(i, n - _LONGEST_CLOSE + 1)
                    break
                i = m.end()
                self._closer = None
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
            if c in "<\u25c1":
                skip = self._marker(i, final)
                if skip is None:
                    break  # too little to tell
                if skip < 0:
                    self.done = True
                    break
                if skip > i:
                    i = skip
                    continue
            if c == "<":
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

    def _marker(self, i: int, final: bool) -> int | None:
        """At a `<` or `◁`: where the text goes on after a reasoning opener (entering the
        block) or a harmony header or end token that is not words; `i` when none is there;
        -1 for a marker that starts the machine part; None when it is too early to tell."""
        text = self._text
        rest = text[i : i + _HEADER_MAX]
        for opener, closer in REASONING:
            if rest.startswith(opener):
                self._closer = re.compile(re.escape(closer))
                return i + len(opener)
            if not final and len(rest) < len(opener) and opener.startswith(rest):
                return None
        if not rest.startswith(("<|", "<\uff5c")):
            return i
        hm = _HARMONY_HEADER.match(text, i)
        if hm is not None:
            if hm.group(1).lower() == "analysis":
                self._closer = _HARMONY_END
                return hm.end()
            return -1 if "to=" in hm.group(0) else hm.end()
        for token in _HARMONY_ENDS:
            if rest.startswith(token):
                return i + len(token)
        early = not final and "<|message|>" not in rest and len(rest) < _HEADER_MAX
        if early and (
            rest.startswith(_HARMONY_STARTS)
            or any(t.startswith(rest) for t in (*_HARMONY_STARTS, *_HARMONY_ENDS))
        ):
            return None  # could still become a header or an end token
        return -1  # a vendor marker: Kimi's `<|tool_calls_section_begin|>`, DeepSeek's, …


_CANDIDATE = re.compile(r"[<`\n\u25c1]")


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
