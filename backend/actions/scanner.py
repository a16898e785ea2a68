"""Scanning a model reply for actions, without an XML parser.

The reply is read left to right at "top level" (outside any action): reasoning blocks,
code fences, inline code, comments and prose are stepped over; only the known action
openers (and JSON tool calls) start an action. Inside an action, parameter bodies are raw
text: the end of a body is found by `pick_close` (see there), never by parsing the body.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from dataclasses import dataclass
from functools import lru_cache

from backend.actions import messages
from backend.actions.jsoncalls import (
    RawAction,
    calls_in,
    canonical_action,
    decode_at,
    from_mapping,
)
from backend.actions.model import ACTION_ALIASES, KNOWN_ACTIONS, PARAM_ALIASES, ActionSpec
from backend.actions.registry.core import on_change
from backend.actions.values import parse_cdata_run

# ---------------------------------------------------------------------------- names

# action names accepted as XML tags: ours and the underscored aliases
# (rebuilt with the name patterns below by _refresh_names when the registry changes)
TAG_ACTIONS: dict[str, str] = {}
_ALL_ACTION_NAMES: list[str] = []
# `parameters`: Anthropic's legacy `<invoke><tool_name>…</tool_name><parameters>…` wrapper
_WRAPPERS = (
    "function",
    "invoke",
    "tool_call",
    "tool_calls",
    "actions",
    "function_calls",
    "parameters",
)


@lru_cache(maxsize=32)
def _param_names(spec: ActionSpec | None) -> tuple[str, ...]:
    """Tag names that open a param of this action (ours and aliases)."""
    if spec is None:
        own = {p for s in KNOWN_ACTIONS.values() for p in (*s.required, *s.optional)}
    else:
        own = {*spec.required, *spec.optional}
    names = own | {alias for alias, target in PARAM_ALIASES.items() if target in own}
    return tuple(sorted(names, key=len, reverse=True))


@lru_cache(maxsize=32)
def _param_names_lower(spec: ActionSpec | None) -> frozenset[str]:
    return frozenset(p.lower() for p in _param_names(spec))


@lru_cache(maxsize=32)
def _body_follow(spec: ActionSpec | None) -> re.Pattern[str]:
    """What can follow the real end of a parameter body of this action."""
    params = "|".join(re.escape(p) for p in _param_names(spec))
    return re.compile(_FOLLOW_ANY[:-1] + r"|<(?:" + params + r")(?=[\s/>]))", re.I)


@lru_cache(maxsize=64)
def _tag_open(name: str) -> re.Pattern[str]:
    return re.compile(_TAG_OPEN_FULL.format(name=re.escape(name)))


def canonical_param(spec: ActionSpec | None, name: str) -> str:
    if spec is None:
        return name
    params = (*spec.required, *spec.optional)
    for candidate in (name, name.lower()):
        if candidate in params:
            return candidate
        alias = PARAM_ALIASES.get(candidate)
        if alias in params:
            return alias
    return name


# ---------------------------------------------------------------------------- regexes

_TOP = re.compile(r"[<`~{\[]")
_TAG = re.compile(r"<(/?)((?:[A-Za-z_][\w.-]*:)?[A-Za-z_][\w.-]*)")
_ATTR = re.compile(r"""([\w:.-]+)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'<>/]+))""")
_TAG_OPEN_FULL = r"""<{name}((?:\s+[\w:.-]+\s*=\s*(?:"[^"]*"|'[^']*'|[^\s"'<>/]+))*)\s*(/?)>"""
_THINK_OPEN = re.compile(r"<(think|thinking)(?:\s[^<>]*)?>", re.I)
_THINK_CLOSE = re.compile(r"</(?:think|thinking)\s*>", re.I)
_FUNCTION_OPEN = re.compile(
    r"""<function(?:=\s*["']?([^\s"'<>]+)["']?|\s+name\s*=\s*["']([^"']+)["'][^<>]*)\s*>""",
    re.I,
)
_INVOKE_OPEN = re.compile(
    r"""<(?:[\w.-]+:|\uff5cDSML\uff5c)?invoke\s+name\s*=\s*["']([^"']+)["'][^<>]*>""",
    re.I,
)
# Anthropic's legacy tool use (Claude 2.1 era prompts, still written by models trained on
# them): `<function_calls><invoke><tool_name>NAME</tool_name><parameters><p>v</p>…`
_LEGACY_INVOKE_OPEN = re.compile(
    r"<(?:[\w.-]+:)?invoke\s*>\s*<tool_name>\s*([\w.-]+)\s*</tool_name>\s*(?:<parameters>)?",
    re.I,
)
# Qwen3's malformed parameter openers: the `>` dropped after the name (`<parameter=path\n…`)
# or the value written into the opener (`<parameter=command=str_replace</parameter>`)
_PARAM_MALFORMED_OPEN = re.compile(
    r"<(?:[\w.-]+:)?parameter=\s*([A-Za-z_][\w.-]*)(?:=|[ \t]*(?=\r?\n))",
    re.I,
)
# `<parameter=NAME>`, `<parameter name="NAME">` and the malformed variants models write:
# `name=NAME` unquoted, `<param …>`, `<argument …>`, `<arg …>` (group 1 is the tag word)
_PARAM_STYLE_OPEN = re.compile(
    r"""<(?:[\w.-]+:|\uff5cDSML\uff5c)?(parameter|param|argument|arg)"""
    r"""(?:=\s*["']?([^\s"'<>]+)["']?"""
    r"""|\s+name\s*=\s*(?:"([^"<>]*)"|'([^'<>]*)'|([^\s"'<>/]+))[^<>]*)\s*>""",
    re.I,
)
_PARAM_TAG_OPEN = re.compile(r"<([A-Za-z_][\w.-]*)((?:\s[^<>]*)?)(/?)>")
_CDATA = "<![CDATA["
_MAX_JSON_FAILURES = 64  # each failed attempt costs O(position) in the json module
_FENCE_INFO = re.compile(r"[\w+#.-]*[ \t]*\r?\n")
_ACTION_CLOSE_OK = re.compile(r"""[^"'`\\)\]},;+]|\Z""")
# what may follow the real end of a parameter body (after whitespace)
_FOLLOW_ANY = ""  # set by _refresh_names
# GLM-4.5: `<tool_call>NAME\n<arg_key>K</arg_key>\n<arg_value>V</arg_value>…</tool_call>`
_GLM_OPEN = re.compile(
    r"<((?:[\w.-]+:)?tool_call)>[ \t]*([A-Za-z_][\w.-]*)[ \t]*\r?\n?\s*(?=<arg_key>)"
)
_ARG_KEY = re.compile(r"<arg_key>\s*([^<>]+?)\s*</arg_key>\s*<arg_value>")
# Vendor tool-call markers followed by a name and JSON arguments (docs/dialects.md):
# DeepSeek V3 `<|tool_call_begin|>function<|tool_sep|>NAME\n```json\n{…}\n```` and V3.1
# `<|tool_call_begin|>NAME<|tool_sep|>{…}` (written with U+FF5C bars and U+2581 for the
# underscores); Kimi K2
# `<|tool_call_begin|>functions.NAME:0<|tool_call_argument_begin|>{…}`; gpt-oss (harmony)
# `<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{…}`.
_DS_BAR = "\uff5c"  # DeepSeek's fullwidth vertical line
_DSML = f"<{_DS_BAR}DSML{_DS_BAR}"  # DeepSeek V3.2's tag prefix
_DEEPSEEK_CALL = re.compile(
    f"<{_DS_BAR}tool\u2581call\u2581begin{_DS_BAR}>"
    + r"[ \t]*([\w.-]+)[ \t]*"
    + f"<{_DS_BAR}tool\u2581sep{_DS_BAR}>"
    + r"[ \t]*(?:([\w.-]+)[ \t]*(?=\r?\n|```))?"
)
_KIMI_CALL = re.compile(
    r"<\|tool_call_begin\|>[ \t]*(?:functions\.)?([\w.-]+?)(?::\d+)?[ \t]*"
    r"<\|tool_call_argument_begin\|>"
)
_HARMONY_CALL = re.compile(
    r"<\|(?:start|channel)\|>[^<>\n]{0,80}?\bto=(?:functions\.)?([\w.-]+)"
    r"(?:[^<>]|<\|(?:channel|constrain)\|>){0,120}?<\|message\|>"
)
# Mistral (tokenizer v11+): `[TOOL_CALLS]NAME[ARGS]{…}`, optionally `[CALL_ID]id` before
# `[ARGS]`; the older `[TOOL_CALLS][{…}]` is a JSON list and read as such
_MISTRAL_CALL = re.compile(
    r"\[TOOL_CALLS\][ \t]*([A-Za-z_][\w.-]*)[ \t]*(?:\[CALL_ID\][ \t]*[\w-]*[ \t]*)?\[ARGS\]"
)
_JSON_FENCE = re.compile(r"\s*(?:```|~~~)[\w-]*[ \t]*\r?\n")

_NEW_ACTION = re.compile("")  # set by _refresh_names


def _refresh_names() -> None:
    """(Re)build the tables and patterns that name every known action."""
    global _ALL_ACTION_NAMES, _FOLLOW_ANY, _NEW_ACTION
    TAG_ACTIONS.clear()
    TAG_ACTIONS.update({name: name for name in KNOWN_ACTIONS})
    TAG_ACTIONS.update({a: c for a, c in ACTION_ALIASES.items() if "_" in a})
    _ALL_ACTION_NAMES = sorted({*KNOWN_ACTIONS, *ACTION_ALIASES}, key=len, reverse=True)
    names = "|".join(re.escape(n) for n in _ALL_ACTION_NAMES)
    _FOLLOW_ANY = (
        r"\s*(?:\Z|```|~~~|</?(?:[\w.-]+:|\uff5cDSML\uff5c)?(?:"
        + names
        + "|"
        + "|".join(_WRAPPERS)
        + r")(?=[\s=/>])"
        r"|</?(?:[\w.-]+:|\uff5cDSML\uff5c)?(?:parameter|param|argument|arg)(?=[\s=/>])|<arg_key>)"
    )
    _NEW_ACTION = re.compile(
        r"<(?:(?:"
        + names
        + r")(?=[\s/>])|function(?=[\s=])|(?:[\w.-]+:|\uff5cDSML\uff5c)?invoke\s)",
        re.I,
    )
    _param_names.cache_clear()
    _param_names_lower.cache_clear()
    _body_follow.cache_clear()


_refresh_names()
on_change(_refresh_names)


@lru_cache(maxsize=256)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _cdata_spans(text: str) -> list[tuple[int, int]]:
    """CDATA sections that start in place (a line start or right after a tag)."""
    spans: list[tuple[int, int]] = []
    pos = text.find(_CDATA)
    while pos >= 0:
        run = parse_cdata_run(text, pos) if _opener_in_place(text, pos) else None
        if run is not None:
            spans.append((pos, run[1]))
            pos = text.find(_CDATA, run[1])
        else:
            pos = text.find(_CDATA, pos + 1)
    return spans


def _line_indent(text: str, i: int) -> str:
    """The spaces/tabs before `i` when they are all that precedes it on its line."""
    k = i
    while k > 0 and text[k - 1] in " \t":
        k -= 1
    return text[k:i] if k == 0 or text[k - 1] == "\n" else ""


def _at_line_start(text: str, i: int) -> bool:
    k = i - 1
    while k >= 0 and text[k] in " \t":
        k -= 1
    return k < 0 or text[k] == "\n"


def _opener_in_place(text: str, start: int) -> bool:
    k = start - 1
    while k >= 0 and text[k] in " \t":
        k -= 1
    return k < 0 or text[k] in "\n>"


@dataclass(frozen=True)
class _Tok:
    start: int
    end: int
    kind: int  # +1 opener, -1 closer that can end a body, 0 closer that cannot


class _Tokens:
    """Openers and closers of one tag over the whole reply, found once.

    `pattern` matches `<` or `</` plus the tag name (group 1 is the slash); it starts
    with a literal `<` and is case-sensitive, so the regex engine skips ahead fast.
    """

    def __init__(
        self,
        text: str,
        pattern: re.Pattern[str],
        follow: re.Pattern[str],
        cdata: list[tuple[int, int]],
    ) -> None:
        toks: list[_Tok] = []
        cdata_starts = [a for a, _ in cdata]
        n = len(text)
        for m in pattern.finditer(text):
            start = m.start()
            if cdata:
                k = bisect_left(cdata_starts, start + 1) - 1
                if k >= 0 and start < cdata[k][1]:
                    continue  # inside a CDATA section: text, not a tag
            if m.group(1):  # closer: `</name>` with optional spaces
                end = m.end()
                while end < n and text[end] in " \t\r\n":
                    end += 1
                if end >= n or text[end] != ">":
                    continue
                kind = -1 if follow.match(text, end + 1) else 0
                toks.append(_Tok(start, end + 1, kind))
            else:
                # an opener counts when it starts a line or follows a tag: not when quoted
                # in code (`"<content>"`), which would otherwise unbalance the count
                gt = text.find(">", m.end())
                if gt < 0 or text[gt - 1] == "/" or not _opener_in_place(text, start):
                    continue
                toks.append(_Tok(start, gt + 1, 1))
        self.toks = toks
        self.starts = [t.start for t in toks]
        # indices of candidate closers, and of all closers, for skipping openers fast
        self.cands = [i for i, t in enumerate(toks) if t.kind == -1]
        self.closers = [i for i, t in enumerate(toks) if t.kind <= 0]
        self._sums: tuple[list[int], list[int]] | None = None

    def _range(self, lo: int, hi: int) -> range:
        return range(bisect_left(self.starts, lo), bisect_left(self.starts, hi))

    def _prefix(self) -> tuple[list[int], list[int]]:
        """Running sums of +1 openers / -1 candidate closers (others 0), and their
        suffix minima: for `pick_close` without pairing, in O(1) per candidate."""
        if self._sums is None:
            sums = [0]
            for tok in self.toks:
                sums.append(sums[-1] + tok.kind)
            sufmin = sums[:]
            for i in range(len(sufmin) - 2, -1, -1):
                sufmin[i] = min(sufmin[i], sufmin[i + 1])
            self._sums = (sums, sufmin)
        return self._sums

    def pick_close(self, lo: int, hi: int, *, pair_quoted: bool = True) -> _Tok | None:
        """The closer that ends a body starting at `lo`, looking no further than `hi`.

        Candidates are closers followed by what can follow a body (the action's close
        tag, another parameter, a new action, the end). The chosen one is the FIRST
        candidate after which the rest of the window stays balanced: read on, an opener
        opens, any closer closes an open one, and a candidate closer with nothing open
        means the earlier candidate was text inside the body. A closer that cannot end a
        body (quoted in code: `find("</content>")`) never unbalances; with `pair_quoted`
        off (action close tags, whose window runs to the end of the reply and so holds
        the next actions' bodies) it is not counted at all. So a file quoting
        `</content></write_code>` is not cut there, nested examples and Atom `<content>`
        elements stay inside, and two actions in a row still split at the first closer.
        The last candidate always qualifies.
        """
        toks = self.toks
        idx = self._range(lo, hi)
        cands = (
            self.cands[c]
            for c in range(bisect_left(self.cands, idx.start), bisect_left(self.cands, idx.stop))
        )
        if not pair_quoted and hi >= (toks[-1].start + 1 if toks else 0):
            sums, sufmin = self._prefix()
            for i in cands:
                # the sums after toks[i] never drop below the sum right after it
                if toks[i].kind == -1 and (i + 2 >= len(sums) or sufmin[i + 2] >= sums[i + 1]):
                    return toks[i]
            return None
        stop = idx.stop
        for i in cands:
            depth = 0
            for j in range(i + 1, stop):
                kind = toks[j].kind
                if kind == 1:
                    depth += 1
                elif kind == 0 and not pair_quoted:
                    continue
                elif depth > 0:
                    depth -= 1
                elif kind == -1:
                    break
            else:
                return toks[i]
        return None

    def any_close(self, lo: int, hi: int) -> _Tok | None:
        """The last closer of any kind in the window."""
        idx = self._range(lo, hi)
        k = bisect_left(self.closers, idx.stop) - 1
        return self.toks[self.closers[k]] if k >= 0 and self.closers[k] >= idx.start else None

    def first_close(self, lo: int, hi: int) -> _Tok | None:
        """The first closer of any kind in the window."""
        idx = self._range(lo, hi)
        k = bisect_left(self.closers, idx.start)
        if k < len(self.closers) and self.closers[k] < idx.stop:
            return self.toks[self.closers[k]]
        return None


@dataclass
class _Dialect:
    key: str
    tags: str  # regex: `<` or `</` (group 1) and the tag name, for balancing


_INVOKE = _Dialect("invoke", r"<(/?)(?:[\w.-]+:|\uff5cDSML\uff5c)?invoke(?=[\s>])")


class Scanner:
    def __init__(self, text: str) -> None:
        self.text = text
        self.n = len(text)
        self.actions: list[RawAction] = []
        self.thinking: list[str] = []
        self.mentions: list[str] = []
        self.unclosed_reasoning = False
        self._stray: int | None = None  # the last `</think>` with no opener
        self._json_failures = 0
        self._cache: dict[tuple[str, str], _Tokens] = {}
        self._cdata: list[tuple[int, int]] | None = None
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
            else:  # `{` or `[`: a JSON tool call?
                pos = self._at_json(i, fence is not None)
        if self._stray is not None:
            before = _THINK_CLOSE.sub("", _THINK_OPEN.sub("", text[: self._stray])).strip()
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
        if local in ("think", "thinking") and not fenced:
            return self._reasoning(i, closing == "/")
        if closing:
            return i + 1
        if local == "function":
            fm = _FUNCTION_OPEN.match(text, i)
            if fm:
                fname = fm.group(1) or fm.group(2) or ""
                d = _Dialect("function", r"<(/?)function(?=[\s=>])")
                return self._action(fname, i, fm.end(), d, fenced, {}, loose=True)
        elif local == "tool_call":
            gm = _GLM_OPEN.match(text, i)
            if gm:
                d = _Dialect("glm", r"<(/?)(?:[\w.-]+:|\uff5cDSML\uff5c)?tool_call(?=[\s>])")
                return self._action(gm.group(2), i, gm.end(), d, fenced, {}, loose=True)
        elif local == "invoke":
            im = _INVOKE_OPEN.match(text, i) or _LEGACY_INVOKE_OPEN.match(text, i)
            if im:
                return self._action(im.group(1), i, im.end(), _INVOKE, fenced, {}, loose=True)
        elif low in TAG_ACTIONS:
            om = _tag_open(name).match(text, i)
            if om and not om.group(1) and not om.group(2) and self._no_close_after(name, i):
                # fast path (floods of openers stay cheap): no close tag anywhere after it
                # and no parameter right after it, so this opener is a mention in prose
                pos = om.end()
                while pos < self.n and text[pos] in " \t\r\n":
                    pos += 1
                if pos >= self.n or not self._param_opener_at(
                    pos, KNOWN_ACTIONS.get(TAG_ACTIONS[low])
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
                    return self._finish_selfclosing(TAG_ACTIONS[low], attrs, fenced, i, om.end())
                return self._action(name, i, om.end(), d, fenced, attrs, loose=False)
        return i + 1

    def _reasoning(self, i: int, closing: bool) -> int:
        text = self.text
        if closing:
            # a `</think>` with no opener: everything before it was reasoning
            end = text.find(">", i) + 1
            self._stray = i
            self.thinking = []
            self.actions.clear()
            self.mentions.clear()
            return end
        om = _THINK_OPEN.match(text, i)
        if om is None:
            return i + 1
        cm = _THINK_CLOSE.search(text, om.end())
        if cm is None:
            rest = text[om.end() :]
            final, cut = ([], 0) if self.nested else _final_actions(rest)
            if final:
                # Qwen 3.5 habit: the block is never closed, yet the reply ends with a
                # complete action at the start of a line: that action is the answer
                body = rest[:cut].strip()
                if body:
                    self.thinking.append(body)
                for action in final:
                    action.warnings.append(
                        "your <think> block was never closed; the complete action(s) at the "
                        "end of the reply were run. Close reasoning with </think>."
                    )
                self.actions.extend(final)
                return -1
            body = rest.strip()
            if body:
                self.thinking.append(body)
            self.unclosed_reasoning = True
            return -1
        body = text[om.end() : cm.start()].strip()
        if body:
            self.thinking.append(body)
        return cm.end()

    def _vendor(self, i: int, fenced: bool) -> int:
        text = self.text
        if text.startswith(_DSML, i):
            # DeepSeek V3.2 (DSML, the bars are U+FF5C): `<|DSML|invoke name="…">` +
            # `<|DSML|parameter name="…" string="true">…</|DSML|parameter>`: the
            # invoke/parameter dialect with a prefix (`(?:[\w.-]+:|\uff5cDSML\uff5c)?`
            # in the regexes is that prefix or a namespace like `minimax:`)
            im = _INVOKE_OPEN.match(text, i)
            if im is not None:
                return self._action(im.group(1), i, im.end(), _INVOKE, fenced, {}, loose=True)
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
                action.error = messages.bad_arguments(name, "not a JSON object")
            self.actions.append(action)
            return pos
        obj, end = decoded
        action = from_mapping(name, obj if isinstance(obj, dict) else [obj])
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
        calls = calls_in(obj)
        if not calls:
            return end
        for call in calls:
            call.fenced = fenced
            call.start, call.end = i, end
            self.actions.append(call)
        return end

    # ------------------------------------------------------------------ actions

    def _tokens(self, key: str, tags: str, follow: re.Pattern[str]) -> _Tokens:
        cache_key = (key, follow.pattern)
        toks = self._cache.get(cache_key)
        if toks is None:
            if self._cdata is None:
                self._cdata = _cdata_spans(self.text)
            toks = _Tokens(self.text, _compiled(tags), follow, self._cdata)
            self._cache[cache_key] = toks
        return toks

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
        *,
        loose: bool,
    ) -> int:
        text, n = self.text, self.n
        canon = canonical_action(written, loose=loose)
        spec = KNOWN_ACTIONS.get(canon) if canon else None
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

    def _opener_ahead(self, dialect: _Dialect, lo: int, hi: int) -> bool:
        """Another opener of the same action kind in [lo, hi)."""
        pattern = _compiled(dialect.tags)
        m = pattern.search(self.text, lo, hi)
        while m is not None and m.group(1):
            m = pattern.search(self.text, m.end(), hi)
        return m is not None

    def _param_opener_at(self, pos: int, spec: ActionSpec | None) -> bool:
        text = self.text
        if _PARAM_STYLE_OPEN.match(text, pos):
            return True
        tm = _PARAM_TAG_OPEN.match(text, pos)
        if tm is None:
            return False
        return tm.group(1).lower() in _param_names_lower(spec)

    def _params(
        self,
        action: RawAction,
        spec: ActionSpec | None,
        pos: int,
        region_end: int,
        closed: bool,
    ) -> int:
        """Reads params until the region ends; returns where reading stopped."""
        text = self.text
        follow = _body_follow(spec)
        while pos < region_end:
            j = text.find("<", pos, region_end)
            if j < 0:
                return region_end
            if _NEW_ACTION.match(text, j) or _THINK_OPEN.match(text, j):
                return j  # the close tag is missing; a new action starts here
            am = _ARG_KEY.match(text, j)
            pm = None if am else _PARAM_STYLE_OPEN.match(text, j)
            mm = None if am or pm else _PARAM_MALFORMED_OPEN.match(text, j)
            if mm:
                written = mm.group(1)
                tags = r"<(/?)(?:[\w.-]+:|\uff5cDSML\uff5c)?parameter(?=[\s=>])"
                key = "parameter:parameter"
                selfclosing = False
                vstart = mm.end()
                action.warnings.append(
                    f"<parameter={written} had no `>` after the name; write "
                    f"<parameter={written}>value</parameter>"
                )
            elif am:
                written = am.group(1)
                tags = r"<(/?)arg_value(?=[\s>])"
                key = "arg_value"
                selfclosing = False
                vstart = am.end()
            elif pm:
                written = next((g for g in pm.group(2, 3, 4, 5) if g is not None), "")
                word = re.escape(pm.group(1))
                tags = rf"<(/?)(?:[\w.-]+:|\uff5cDSML\uff5c)?{word}(?=[\s=>])"
                key = "parameter:" + pm.group(1)
                selfclosing = False
                vstart = pm.end()
            else:
                tm = _PARAM_TAG_OPEN.match(text, j)
                if tm is None:
                    pos = j + 1
                    continue
                written = tm.group(1)
                if written.lower() in ("parameter", "function", "invoke"):
                    pos = tm.end()
                    continue
                esc = re.escape(written)
                tags = rf"<(/?){esc}(?=[\s/>])"
                key = "tag:" + written
                selfclosing = bool(tm.group(3))
                vstart = tm.end()
            canon = canonical_param(spec, written)
            if selfclosing:
                action.params.append((written, "", True))
                pos = vstart
                continue
            raw = spec is None or canon in spec.raw
            toks = self._tokens(key, tags, follow)
            value, pos = self._value(
                action, spec, written, canon, raw, toks, vstart, region_end, closed
            )
            if value is None:
                return self.n
            indent = _line_indent(text, j)
            if indent:
                action.indents[len(action.params)] = indent
            action.params.append((written, value, True))
        return region_end

    def _value(
        self,
        action: RawAction,
        spec: ActionSpec | None,
        written: str,
        canon: str,
        raw: bool,
        toks: _Tokens,
        vstart: int,
        region_end: int,
        closed: bool,
    ) -> tuple[str | None, int]:
        """(body text, position after its closer); (None, _) when cut off."""
        text = self.text
        # a body that is CDATA: its inside is opaque, whatever it holds
        k = vstart
        while k < region_end and text[k] in " \t\r\n":
            k += 1
        if text.startswith(_CDATA, k):
            run = parse_cdata_run(text, k)
            if run is not None:
                after = run[1]
                while after < region_end and text[after] in " \t\r\n":
                    after += 1
                tok = toks.first_close(after, region_end)
                if tok is not None and tok.start == after:
                    return text[vstart : tok.start], tok.end
        if raw:
            tok = toks.pick_close(vstart, region_end)
            if tok is None:
                tok = toks.any_close(vstart, region_end)
                if tok is not None:
                    action.warnings.append(
                        f"</{written}> was not followed by another parameter or the action's "
                        "close tag; the last one was taken as the end"
                    )
            if tok is not None:
                return text[vstart : tok.start], tok.end
            # no closer at all
            nxt = self._next_param_line(vstart, region_end, spec)
            if nxt is not None:
                return text[vstart:nxt], nxt
            if closed:
                action.warnings.append(f"<{written}> was not closed; it ends at the action's end")
                return text[vstart:region_end], region_end
            action.truncated = canon
            return None, self.n
        # short value: ends at its closer, which must come before any other tag
        lt = text.find("<", vstart, region_end)
        tok = toks.first_close(vstart, region_end)
        if tok is not None and (lt < 0 or tok.start == lt):
            return text[vstart : tok.start], tok.end
        if lt >= 0:
            action.warnings.append(f"<{written}> was not closed")
            return text[vstart:lt], lt
        if closed:
            action.warnings.append(f"<{written}> was not closed")
            return text[vstart:region_end], region_end
        action.truncated = canon
        return None, self.n

    def _next_param_line(self, lo: int, hi: int, spec: ActionSpec | None) -> int | None:
        """For a body with no closer at all (Qwen's missing `</parameter>`): the next
        parameter opener at the start of a line ends it."""
        m = re.compile(r"\n(?=<(?:[\w.-]+:|\uff5cDSML\uff5c)?parameter[=\s])").search(
            self.text, lo, hi
        )
        return m.start() + 1 if m else None


_WRAPPER_GAP = re.compile(
    r"(?:\s|</?(?:[\w.-]+:|\uff5cDSML\uff5c)?(?:tool_call|tool_calls|function_calls|actions)\s*>)*\Z"
)


_WRAPPER_OPEN_AT_END = re.compile(
    r"<(?:[\w.-]+:|\uff5cDSML\uff5c)?(?:tool_call|tool_calls|function_calls|actions)\s*>\Z"
)


def _final_actions(rest: str) -> tuple[list[RawAction], int]:
    """The complete actions that end `rest` (the text after an unclosed `<think>`), each
    starting a line and with nothing but whitespace or tool-call wrappers around them."""
    sub = Scanner(rest)
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
