"""Scanning a model reply for actions, without an XML parser.

The reply is read left to right at "top level" (outside any action): reasoning blocks,
code fences, inline code, comments and prose are stepped over; only the known action
openers (and JSON tool calls) start an action. Inside an action, parameter bodies are raw
text: the end of a body is found by `pick_close` (see there), never by parsing the body.
"""

from __future__ import annotations

import re

from backend.actions import corrections
from backend.actions.jsoncalls import (
    RawAction,
    calls_in,
    decode_at,
    from_mapping,
)
from backend.actions.model import ActionSpec
from backend.actions.scan_names import (
    _ACTION_CLOSE_OK,
    _ATTR,
    _DEEPSEEK_CALL,
    _DS_BAR,
    _DSML,
    _FENCE_INFO,
    _FUNCTION_OPEN,
    _GLM_OPEN,
    _HARMONY_CALL,
    _INVOKE_OPEN,
    _JSON_FENCE,
    _KIMI_CALL,
    _LEGACY_INVOKE_OPEN,
    _MAX_JSON_FAILURES,
    _MISTRAL_CALL,
    _TAG,
    _THINK_CLOSE,
    _TOP,
    _tag_open,
    canonical_param,
)
from backend.actions.scan_params import ParamReader
from backend.actions.scan_reasoning import (
    HARMONY_ANALYSIS,
    analysis_message_at,
    closer_at,
    opener_at,
    strip_markers,
)
from backend.actions.scan_text import (
    _INVOKE,
    _at_line_start,
    _Dialect,
)
from backend.actions.vocabulary import Vocabulary

__all__ = ["Scanner", "canonical_param"]


class Scanner(ParamReader):
    """One reply's scan for the actions of ``vocab`` (a registry's)."""

    def __init__(self, text: str, vocab: Vocabulary) -> None:
        super().__init__(text, vocab)
        self.actions: list[RawAction] = []
        self.thinking: list[str] = []
        self.mentions: list[str] = []
        self.unclosed_reasoning = False
        self.unclosed_marker = ("<think>", "</think>")  # (opener, closer) of that block
        self.reasoning_calls: list[str] = []  # harmony calls addressed from `analysis`
        self.header_in_analysis = False  # a harmony header inside an analysis message
        self._stray: int | None = None  # the last `</think>` with no opener
        self._json_failures = 0
        # memos that keep hostile replies linear: searches known to fail from here on
        self._no_comment_end = False
        self._no_inline_close: dict[int, int] = {}  # backtick run length -> end of line
        self._next_nl = -1
        self._last_brace: int | None = None  # where the last `}` is (found once, if needed)
        self._last_close: dict[str, int] = {}  # dialect key -> start of its last closer
        self.nested = False  # a scan of the text after an unclosed <think>

    # ------------------------------------------------------------------ top level

    def run(self) -> Scanner:
        text, n = self.text, self.n
        pos = 0
        fence: tuple[str, int] | None = None  # (char, length) of the open fence
        while True:
            m = _TOP.search(text, pos)
            if m is None:
                break
            i = m.start()
            ch = text[i]
            if ch == "<":
                pos = self._at_angle(i, fence is not None)
                if pos < 0:  # unclosed reasoning: the rest is not for us
                    break
            elif ch == "\u25c1":  # Kimi's ◁think▷
                pos = i + 1 if fence is not None else self._reasoning(i)
                if pos < 0:
                    break
            elif ch in "`~":
                j = i
                while j < n and text[j] == ch:
                    j += 1
                run = j - i
                at_line_start = run >= 3 and _at_line_start(text, i)
                if fence is not None:
                    if ch == fence[0] and run >= fence[1]:
                        fence = None
                    pos = j
                elif run >= 3 and (at_line_start or (ch == "`" and _FENCE_INFO.match(text, j))):
                    fence = (ch, run)
                    eol = text.find("\n", j)
                    pos = n if eol < 0 else eol + 1
                elif ch == "`":
                    # inline code: skip to the same run on the same line
                    eol = self._eol(j)
                    if self._no_inline_close.get(run) == eol:
                        close = -1  # already searched this line from further left
                    else:
                        close = text.find(ch * run, j, eol)
                        while close >= 0 and close + run < n and text[close + run] == ch:
                            close = text.find(ch * run, close + run + 1, eol)
                        if close < 0:
                            self._no_inline_close[run] = eol
                    pos = j if close < 0 else close + run
                else:
                    pos = j
            elif text.startswith(("[THINK]", "[/THINK]"), i) and fence is None:  # Magistral
                pos = self._reasoning(i)
                if pos < 0:
                    break
            else:  # `{` or `[`: a JSON tool call?
                pos = self._at_json(i, fence is not None)
        if self._stray is not None:
            before = strip_markers(text[: self._stray]).strip()
            if before:
                self.thinking.insert(0, before)
        return self

    def _no_close_after(self, name: str, i: int) -> bool:
        """Known (from an earlier opener of the same tag) that no close tag follows `i`."""
        last = self._last_close.get("tag:" + name)
        return last is not None and last < i

    def _eol(self, j: int) -> int:
        """The end of the line holding `j` (remembered: one long line stays linear)."""
        if self._next_nl < j:
            k = self.text.find("\n", j)
            self._next_nl = self.n if k < 0 else k
        return self._next_nl

    def _at_angle(self, i: int, fenced: bool) -> int:
        text = self.text
        if text.startswith("<!--", i):
            if fenced or self._no_comment_end:
                return i + 4
            end = text.find("-->", i + 4)
            if end < 0:
                self._no_comment_end = True
                return i + 4
            return end + 3
        if text.startswith(("<" + _DS_BAR, "<|"), i):
            return self._vendor(i, fenced)
        tm = _TAG.match(text, i)
        if tm is None:
            return i + 1
        closing, name = tm.group(1), tm.group(2)
        low = name.lower()
        local = low.rsplit(":", 1)[-1]
        if local in ("think", "thinking", "reasoning") and not fenced:
            return self._reasoning(i)
        if closing:
            return i + 1
        if local == "function":
            fm = _FUNCTION_OPEN.match(text, i)
            if fm:
                fname = fm.group(1) or fm.group(2) or ""
                d = _Dialect("function", r"<(/?)function(?=[\s=>])")
                return self._action(fname, i, fm.end(), d, fenced, {})
        elif local == "tool_call":
            gm = _GLM_OPEN.match(text, i)
            if gm:
                d = _Dialect("glm", r"<(/?)(?:[\w.-]+:|\uff5cDSML\uff5c)?tool_call(?=[\s>])")
                return self._action(gm.group(2), i, gm.end(), d, fenced, {})
        elif local == "invoke":
            im = _INVOKE_OPEN.match(text, i) or _LEGACY_INVOKE_OPEN.match(text, i)
            if im:
                return self._action(im.group(1), i, im.end(), _INVOKE, fenced, {})
        elif low in self.vocab.tags:
            om = _tag_open(name).match(text, i)
            if om and not om.group(1) and not om.group(2) and self._no_close_after(name, i):
                # fast path (floods of openers stay cheap): no close tag anywhere after it
                # and no parameter right after it, so this opener is a mention in prose
                pos = om.end()
                while pos < self.n and text[pos] in " \t\r\n":
                    pos += 1
                if pos >= self.n or not self._param_opener_at(
                    pos, self.vocab.known.get(self.vocab.tags[low])
                ):
                    self.mentions.append(name)
                    return om.end()
            if om:
                attrs = {
                    a.group(1): a.group(2) if a.group(2) is not None else (a.group(3) or a.group(4))
                    for a in _ATTR.finditer(om.group(1))
                }
                esc = re.escape(name)
                d = _Dialect("tag:" + name, rf"<(/?){esc}(?=[\s/>])")
                if om.group(2):  # self-closing: attributes only
                    return self._finish_selfclosing(
                        self.vocab.tags[low], attrs, fenced, i, om.end()
                    )
                return self._action(name, i, om.end(), d, fenced, attrs)
        return i + 1

    def _reasoning(self, i: int) -> int:
        """A reasoning marker at `i` (scan_reasoning.py): steps over the block."""
        text = self.text
        end = closer_at(text, i)
        if end is not None:
            # a closer with no opener (the chat template opened the block in the prompt):
            # everything before it was reasoning
            self._stray = i
            self.thinking = []
            self.actions.clear()
            self.mentions.clear()
            return end
        om = opener_at(text, i)
        if om is None:
            return i + 1
        cm = om.close.search(text, om.end)
        if cm is None:
            self.unclosed_marker = om.names
            rest = text[om.end :]
            final, cut = ([], 0) if self.nested else _final_actions(rest, self.vocab)
            if final:
                # Qwen 3.5 habit: the block is never closed, yet the reply ends with a
                # complete action at the start of a line: that action is the answer
                body = rest[:cut].strip()
                if body:
                    self.thinking.append(body)
                for action in final:
                    action.warnings.append(
                        f"your {om.names[0]} block was never closed; the complete action(s) "
                        f"at the end of the reply were run. Close reasoning with {om.names[1]}."
                    )
                self.actions.extend(final)
                return -1
            body = rest.strip()
            if body:
                self.thinking.append(body)
            self.unclosed_reasoning = True
            return -1
        body = text[om.end : cm.start()].strip()
        if body:
            self.thinking.append(body)
        return cm.end()

    def _analysis(self, i: int) -> int | None:
        """A gpt-oss (harmony) `analysis` message at `i`: reasoning, stepped over whole
        (a call drafted in it never runs); None when the header there is not one."""
        msg = analysis_message_at(self.text, i)
        if msg is None:
            return None
        if msg.recipient is not None:
            self.reasoning_calls.append(msg.recipient)
        self.header_in_analysis = self.header_in_analysis or msg.holds_header
        body = self.text[msg.body_start : msg.body_end if msg.body_end >= 0 else self.n]
        if body.strip():
            self.thinking.append(body.strip())
        if msg.body_end < 0:
            self.unclosed_reasoning = True
            self.unclosed_marker = HARMONY_ANALYSIS
            return -1
        return msg.end

    def _vendor(self, i: int, fenced: bool) -> int:
        text = self.text
        if not fenced and text.startswith(("<|start|>", "<|channel|>"), i):
            end = self._analysis(i)
            if end is not None:
                return end
        if not fenced and text.startswith(("<|START_THINKING|>", "<|END_THINKING|>"), i):
            return self._reasoning(i)
        if text.startswith(_DSML, i):
            # DeepSeek V3.2 (DSML, the bars are U+FF5C): `<|DSML|invoke name="…">` +
            # `<|DSML|parameter name="…" string="true">…</|DSML|parameter>`: the
            # invoke/parameter dialect with a prefix (`(?:[\w.-]+:|\uff5cDSML\uff5c)?`
            # in the regexes is that prefix or a namespace like `minimax:`)
            im = _INVOKE_OPEN.match(text, i)
            if im is not None:
                return self._action(im.group(1), i, im.end(), _INVOKE, fenced, {})
            return i + 1
        m = _DEEPSEEK_CALL.match(text, i)
        if m is not None:
            return self._named_json(m.group(2) or m.group(1), i, m.end(), fenced)
        m = _KIMI_CALL.match(text, i) or _HARMONY_CALL.match(text, i)
        if m is not None:
            return self._named_json(m.group(1), i, m.end(), fenced)
        return i + 1

    def _named_json(self, name: str, start: int, pos: int, fenced: bool) -> int:
        """A tool name given by a marker, then its JSON arguments (maybe in a ```json fence)."""
        text = self.text
        fm = _JSON_FENCE.match(text, pos)
        if fm is not None:
            pos = fm.end()
        while pos < self.n and text[pos] in " \t\r\n":
            pos += 1
        decoded = None
        if text.startswith("{", pos) and self._json_failures < _MAX_JSON_FAILURES:
            decoded = decode_at(text, pos)
            if decoded is None:
                self._json_failures += 1
        if decoded is None:
            action = RawAction(name=name, known=True, fenced=fenced, start=start, end=pos)
            if self._last_brace is None:
                self._last_brace = text.rfind("}")
            if pos >= self.n or self._last_brace < pos:
                action.truncated = "arguments"
            else:
                action.error = corrections.bad_arguments(self.vocab, name, "not a JSON object")
            self.actions.append(action)
            return pos
        obj, end = decoded
        action = from_mapping(self.vocab, name, obj if isinstance(obj, dict) else [obj])
        action.fenced, action.start, action.end = fenced, start, end
        self.actions.append(action)
        return end

    def _at_json(self, i: int, fenced: bool) -> int:
        text = self.text
        if text.startswith("[TOOL_CALLS]", i):
            mm = _MISTRAL_CALL.match(text, i)
            if mm is not None:
                return self._named_json(mm.group(1), i, mm.end(), fenced)
        j = i + 1
        while j < self.n and text[j] in " \t\r\n":
            j += 1
        want = '"' if text[i] == "{" else "{"
        if j >= self.n or text[j] != want:
            return i + 1
        if self._json_failures >= _MAX_JSON_FAILURES:
            return i + 1
        decoded = decode_at(text, i)
        if decoded is None:
            self._json_failures += 1
            return i + 1
        obj, end = decoded
        calls = calls_in(self.vocab, obj)
        if not calls:
            return end
        for call in calls:
            call.fenced = fenced
            call.start, call.end = i, end
            self.actions.append(call)
        return end

    # ------------------------------------------------------------------ actions

    def _finish_selfclosing(
        self, name: str, attrs: dict[str, str], fenced: bool, start: int, end: int
    ) -> int:
        action = RawAction(name=name, known=True, fenced=fenced, closed=True, start=start, end=end)
        action.params = [(k, v, True) for k, v in attrs.items()]
        self.actions.append(action)
        return end

    def _action(
        self,
        written: str,
        start: int,
        body_start: int,
        dialect: _Dialect,
        fenced: bool,
        attrs: dict[str, str],
    ) -> int:
        text, n = self.text, self.n
        canon = self.vocab.canonical(written)
        spec = self.vocab.known.get(canon) if canon else None
        action = RawAction(
            name=canon or written, known=spec is not None, fenced=fenced, start=start
        )
        action.params = [(k, v, True) for k, v in attrs.items()]

        # where the action ends: its close tag, balanced against nested/quoted ones
        action_close_ok = _ACTION_CLOSE_OK
        region = self._tokens(dialect.key, dialect.tags, action_close_ok)
        if dialect.key not in self._last_close:
            last = region.toks[region.closers[-1]].start if region.closers else -1
            self._last_close[dialect.key] = last
        close = region.pick_close(body_start, n, pair_quoted=False) or region.first_close(
            body_start, n
        )
        region_end = close.start if close else n

        pos = body_start
        while pos < n and text[pos] in " \t\r\n":
            pos += 1
        is_tag = dialect.key.startswith("tag:")
        if is_tag and pos < region_end and not self._param_opener_at(pos, spec):
            # body mode: `<terminal_run>ls</terminal_run>`, `<write_code path="a">…`
            target = _body_param(spec, {canonical_param(spec, k) for k in attrs})
            if close is None:
                if attrs and target is not None and not self._opener_ahead(dialect, body_start, n):
                    # `<write_code path="a.py">` + text, and the reply ends: cut off
                    action.truncated = target
                    self.actions.append(action)
                    return n
                self.mentions.append(written)
                return body_start  # a mention in prose, not an action
            if self._opener_ahead(dialect, body_start, region_end) or _THINK_CLOSE.search(
                text, body_start, region_end
            ):
                self.mentions.append(written)
                return body_start  # a mention in prose, not an action
            body = text[body_start:region_end]
            if target is None:
                action.warnings.append(f"text directly inside <{written}> was ignored")
            else:
                action.params.append((target, body, True))
            action.closed = True
            action.end = close.end
            self.actions.append(action)
            return close.end
        if is_tag and pos >= region_end and close is None and not attrs:
            self.mentions.append(written)
            return body_start

        end = self._params(action, spec, body_start, region_end, close is not None)
        if end == region_end and close is not None:
            action.closed = True
            end = close.end
        if not action.params and not action.closed and is_tag:
            self.mentions.append(written)
            return body_start
        action.end = end
        self.actions.append(action)
        return end


_WRAPPER_GAP = re.compile(
    r"(?:\s|</?(?:[\w.-]+:|\uff5cDSML\uff5c)?(?:tool_call|tool_calls|function_calls|actions)\s*>)*\Z"
)


_WRAPPER_OPEN_AT_END = re.compile(
    r"<(?:[\w.-]+:|\uff5cDSML\uff5c)?(?:tool_call|tool_calls|function_calls|actions)\s*>\Z"
)


def _final_actions(rest: str, vocab: Vocabulary) -> tuple[list[RawAction], int]:
    """The complete actions that end `rest` (the text after an unclosed `<think>`), each
    starting a line and with nothing but whitespace or tool-call wrappers around them."""
    sub = Scanner(rest, vocab)
    sub.nested = True
    sub.run()
    chosen: list[RawAction] = []
    boundary = len(rest)
    for action in reversed(sub.actions):
        if action.start < 0 or action.end < 0 or not action.closed or action.truncated:
            break
        if action.error is not None or action.fenced:
            break
        if not _WRAPPER_GAP.match(rest, action.end, boundary):
            break
        line_start = rest.rfind("\n", 0, action.start) + 1
        if not _WRAPPER_GAP.match(rest[line_start : action.start]):
            break
        chosen.insert(0, action)
        boundary = line_start
    # where the reasoning ends: before the wrappers that open the first chosen action
    k = boundary
    while True:
        while k > 0 and rest[k - 1].isspace():
            k -= 1
        m = _WRAPPER_OPEN_AT_END.search(rest, max(0, k - 80), k)
        if m is None:
            return chosen, k
        k = m.start()


def _body_param(spec: ActionSpec | None, given: set[str]) -> str | None:
    if spec is None:
        return None
    for p in (*spec.raw, *spec.required):
        if p not in given:
            return p
    return None
