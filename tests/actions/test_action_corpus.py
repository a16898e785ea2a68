"""The table-driven corpus of real-looking replies (tests/actions/corpus.py)."""

from __future__ import annotations

import pytest

from backend.actions import FormatError, TruncatedReplyError, parse_actions

from .corpus import CASES, Case, Err


def test_corpus_is_big_enough() -> None:
    assert len(CASES) >= 60
    assert len({c.name for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_corpus(case: Case) -> None:
    kwargs = {"finish_reason": case.finish_reason, "tool_calls": case.tool_calls}
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
