"""Reading positions in a reply: CDATA spans, lines, and the tokens of one dialect's tags."""

from __future__ import annotations

import re
from bisect import bisect_left
from dataclasses import dataclass

from backend.actions.scan_names import (
    _CDATA,
)
from backend.actions.values import parse_cdata_run


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
