"""Reasoning in every dialect the scanner knows: where a block opens and where it closes.

Reasoning never runs: a draft action inside it is text. The markers (docs/dialects.md):
`<think>`, `<thinking>`, `<reasoning>` and namespaced ones like Seed-OSS's `<seed:think>`;
Kimi's `◁think▷…◁/think▷`; Magistral's `[THINK]…[/THINK]`; Command A's
`<|START_THINKING|>…<|END_THINKING|>`; and gpt-oss (harmony) messages in the `analysis`
channel, `<|channel|>analysis<|message|>…<|end|>`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# tags (case-insensitive, any namespace, attributes allowed): group 1 is set
_TAG_OPEN = r"(?i:<(?:[\w.-]+:)?(think|thinking|reasoning)(?:\s[^<>]*)?>)"
_TAG_CLOSE = r"(?i:</(?:[\w.-]+:)?(?:think|thinking|reasoning)\s*>)"
# the other markers, written exactly so
_MARKERS = {
    "\u25c1think\u25b7": "\u25c1/think\u25b7",  # Kimi: ◁think▷ … ◁/think▷
    "[THINK]": "[/THINK]",  # Magistral
    "<|START_THINKING|>": "<|END_THINKING|>",  # Command A Reasoning
}

REASONING_OPEN = re.compile(_TAG_OPEN + "|" + "|".join(re.escape(opener) for opener in _MARKERS))
REASONING_CLOSE = re.compile(
    _TAG_CLOSE + "|" + "|".join(re.escape(closer) for closer in _MARKERS.values())
)
_TAG_CLOSE_RE = re.compile(_TAG_CLOSE)
_MARKER_CLOSE_RE = {opener: re.compile(re.escape(c)) for opener, c in _MARKERS.items()}
# the first character of Kimi's marker, for the top-level scan (which already stops at
# `<` and at `[`, for JSON)
MARKER_STARTS = "\u25c1"


@dataclass(frozen=True)
class Opener:
    end: int  # where the block's text starts
    close: re.Pattern[str]  # what closes it
    names: tuple[str, str]  # (opener, closer) as a message to the model writes them


def opener_at(text: str, i: int) -> Opener | None:
    """The reasoning opener at `i`, if one is there."""
    m = REASONING_OPEN.match(text, i)
    if m is None:
        return None
    if m.group(1) is not None:
        name = m.group(1)
        return Opener(m.end(), _TAG_CLOSE_RE, (f"<{name}>", f"</{name}>"))
    marker = m.group(0)
    return Opener(m.end(), _MARKER_CLOSE_RE[marker], (marker, _MARKERS[marker]))


def closer_at(text: str, i: int) -> int | None:
    """The end of the reasoning close marker at `i`, if one is there."""
    m = REASONING_CLOSE.match(text, i)
    return None if m is None else m.end()


def strip_markers(text: str) -> str:
    return REASONING_CLOSE.sub("", REASONING_OPEN.sub("", text))


# ---------------------------------------------------------------------------- harmony

# a message header: `<|start|>assistant<|channel|>analysis<|message|>` or, at the start
# of a reply (the prompt ended with `<|start|>assistant`), `<|channel|>…<|message|>`;
# the recipient (`to=functions.NAME`) may be in the role or the channel part
_HARMONY_HEADER = re.compile(
    r"<\|(?:start|channel)\|>(?:[^<>]|<\|(?:channel|constrain)\|>){0,200}?<\|message\|>"
)
_HARMONY_CHANNEL = re.compile(r"<\|channel\|>[ \t]*([\w-]+)")
_HARMONY_RECIPIENT = re.compile(r"\bto=(?:functions\.)?([\w.-]+)")
# a message ends with `<|end|>`, `<|call|>` or `<|return|>` and only so: a header inside
# an analysis message that never ended is still reasoning (a draft call quoted whole)
_HARMONY_END = re.compile(r"<\|(?:end|call|return)\|>")
HARMONY_ANALYSIS = ("analysis-channel", "<|end|>")


@dataclass(frozen=True)
class AnalysisMessage:
    body_start: int
    body_end: int  # -1: never ended
    end: int  # where scanning goes on
    recipient: str | None  # `to=functions.NAME` in the header: a call in the wrong channel
    holds_header: bool  # another message's header inside it: its `<|end|>` was left out


def analysis_message_at(text: str, i: int) -> AnalysisMessage | None:
    """The harmony `analysis` (reasoning) message whose header starts at `i`, if that is one."""
    hm = _HARMONY_HEADER.match(text, i)
    if hm is None:
        return None
    cm = _HARMONY_CHANNEL.search(text, i, hm.end())
    if cm is None or cm.group(1).lower() != "analysis":
        return None
    rm = _HARMONY_RECIPIENT.search(text, i, hm.end())
    recipient = None if rm is None else rm.group(1)
    em = _HARMONY_END.search(text, hm.end())
    body_end = len(text) if em is None else em.start()
    holds = _HARMONY_HEADER.search(text, hm.end(), body_end) is not None
    if em is None:
        return AnalysisMessage(hm.end(), -1, len(text), recipient, holds)
    return AnalysisMessage(hm.end(), em.start(), em.end(), recipient, holds)


_HARMONY_STARTS = re.compile(r"<\|(?:start|channel)\|>")
_HARMONY_END_TOKENS = re.compile(r"<\|(?:end|call|return)\|>")


def without_harmony(text: str) -> str:
    """`text` without harmony's analysis messages (reasoning), and without the headers and
    end tokens of its other messages (the words of `final`/`commentary` stay): for readers
    of words, such as the planner's (the action scanner reads the headers themselves)."""
    if "<|" not in text:
        return text
    kept: list[str] = []
    pos = 0
    while True:
        m = _HARMONY_STARTS.search(text, pos)
        if m is None:
            kept.append(text[pos:])
            break
        kept.append(text[pos : m.start()])
        msg = analysis_message_at(text, m.start())
        if msg is not None:
            if msg.body_end < 0:
                break  # never ended: the rest is reasoning
            pos = msg.end
            continue
        hm = _HARMONY_HEADER.match(text, m.start())
        if hm is not None:
            pos = hm.end()
            continue
        kept.append(m.group(0))
        pos = m.end()
    return _HARMONY_END_TOKENS.sub("", "".join(kept))
