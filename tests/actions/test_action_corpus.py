"""The table-driven corpus of real-looking replies (tests/actions/corpus.py and
corpus_markers.py)."""

from __future__ import annotations

from typing import Any

import pytest

from backend.actions import FormatError, TruncatedReplyError, parse_actions

from .corpus import CASES, Case, Err
from .corpus_markers import MARKER_CASES

ALL_CASES = [*CASES, *MARKER_CASES]


def test_corpus_is_big_enough() -> None:
    assert len(CASES) >= 60
    assert len({c.name for c in ALL_CASES}) == len(ALL_CASES)


@pytest.mark.parametrize("case", ALL_CASES, ids=[c.name for c in ALL_CASES])
def test_corpus(case: Case) -> None:
    kwargs: dict[str, Any] = {"finish_reason": case.finish_reason, "tool_calls": case.tool_calls}
    if isinstance(case.expect, Err):
        with pytest.raises(FormatError) as info:
            parse_actions(case.text, **kwargs)
        assert case.expect.contains in str(info.value)
        assert isinstance(info.value, TruncatedReplyError) == case.expect.truncated
        return
    actions = parse_actions(case.text, **kwargs)
    assert [(a.type, a.params) for a in actions] == case.expect
    warnings = [w for a in actions for w in a.warnings]
    for wanted in case.warnings:
        assert any(wanted in w for w in warnings), warnings
