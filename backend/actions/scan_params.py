"""Reading one action's parameters: the part of the scanner that runs inside an action."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from backend.actions.jsoncalls import (
    RawAction,
)
from backend.actions.model import ActionSpec
from backend.actions.scan_names import (
    _ARG_KEY,
    _CDATA,
    _PARAM_MALFORMED_OPEN,
    _PARAM_STYLE_OPEN,
    _PARAM_TAG_OPEN,
    _THINK_OPEN,
    _compiled,
    canonical_param,
)
from backend.actions.scan_text import (
    _cdata_spans,
    _Dialect,
    _line_indent,
    _Tokens,
)
from backend.actions.values import parse_cdata_run

if TYPE_CHECKING:
    from backend.actions.vocabulary import Vocabulary


class ParamReader:
    """The reply's text, its token caches, and the reading of an action's parameters."""

    def __init__(self, text: str, vocab: Vocabulary) -> None:
        self.text = text
        self.vocab = vocab  # the actions it reads
        self.n = len(text)
        self._cache: dict[tuple[str, str], _Tokens] = {}
        self._cdata: list[tuple[int, int]] | None = None

    def _tokens(self, key: str, tags: str, follow: re.Pattern[str]) -> _Tokens:
        cache_key = (key, follow.pattern)
        toks = self._cache.get(cache_key)
        if toks is None:
            if self._cdata is None:
                self._cdata = _cdata_spans(self.text)
            toks = _Tokens(self.text, _compiled(tags), follow, self._cdata)
            self._cache[cache_key] = toks
        return toks

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
        return tm.group(1).lower() in self.vocab.param_names_lower(spec)

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
        follow = self.vocab.body_follow(spec)
        while pos < region_end:
            j = text.find("<", pos, region_end)
            if j < 0:
                return region_end
            if self.vocab.new_action.match(text, j) or _THINK_OPEN.match(text, j):
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
