"""Replies SmolLM2-135M-Instruct gave on a real llama.cpp server (recorded by
tests/realmodel with RECORD_REAL_MODEL_TO): what planact makes of each is what the model
wrote, nothing more."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from backend.actions import FormatError, parse_actions
from backend.agent.plan_parse import PlanFormatError, parse_plan
from backend.api.settings import CHECK_ANSWER

DATA = Path(__file__).parent / "data" / "smollm2"


def reply(name: str) -> str:
    return (DATA / f"{name}.txt").read_text()


def test_a_planning_reply_in_prose_is_no_plan_and_counts_as_words() -> None:
    with pytest.raises(PlanFormatError) as info:
        parse_plan(reply("planning_prose_only"))
    assert info.value.words  # shown as its answer, and it is asked again


def test_a_plan_it_wrote_in_the_examples_shape_is_its_own_plan() -> None:
    """It reworded the example (its own description and requirement): a plan it presented
    as one, taken as written, never the example's placeholders."""
    text = reply("planning_the_example_reworded")
    _prose, tasks = parse_plan(text)
    assert [t["title"] for t in tasks] == ["Write the script"]
    assert tasks[0]["description"] in text and "…" not in tasks[0]["description"]


@pytest.mark.parametrize("name", ["thinking_refusal_1", "thinking_refusal_2"])
def test_thinking_refusals_hold_no_action_and_read_as_words(name: str) -> None:
    with pytest.raises(FormatError) as info:
        parse_actions(reply(name), finish_reason="length")
    assert "cut off" in str(info.value)  # had the output limit cut it: nothing of it runs
    with pytest.raises(FormatError) as info:
        parse_actions(reply(name))
    assert info.value.words


def test_its_check_answer_is_not_42_so_the_check_says_so() -> None:
    assert not CHECK_ANSWER.search(reply("check_answer"))
    assert re.search(r"\bParis\b", reply("chat_answer"))
