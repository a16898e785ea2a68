"""The prose cut: the agent's words stream; actions, plans and reasoning (<think>, harmony's
analysis channel, …) never do."""

from __future__ import annotations

import pytest

from backend.agent.narration import PLAN_LINE_STARTS, ProseCut, prose_of

CASES = [
    (
        "The script failed with KeyError; I'll fix it.\n<write_code><path>a.py</path>",
        "The script failed with KeyError; I'll fix it.",
    ),
    ("<terminal_run><command>ls</command></terminal_run>", ""),
    ("<think>hmm, a plan</think>\nNow I run it.\n<terminal_run>", "Now I run it."),
    (
        "Check a < b and 3<4 first.\n<finish><message>x</message></finish>",
        "Check a < b and 3<4 first.",
    ),
    ('Calling the tool:\n```json\n{"name": "x"}\n```', "Calling the tool:"),
    ('Using a tool.\n{"name": "terminal_run", "arguments": {}}', "Using a tool."),
    ("Only words, no action.", "Only words, no action."),
    ("Use `ls -la` to list.\n<terminal_run>", "Use `ls -la` to list."),
    ("<function=terminal_run><parameter=command>ls", ""),
    ("", ""),
    # reasoning in the other dialects is not words, and vendor markers end the prose
    ("<reasoning>maybe rm -rf</reasoning>Listing it.\n<terminal_run>", "Listing it."),
    ("\u25c1think\u25b7hmm\u25c1/think\u25b7Reading.\n<read_file>", "Reading."),
    ("<|START_THINKING|>x<|END_THINKING|>Done here.", "Done here."),
    (
        "<|channel|>analysis<|message|>I could rm -rf build/; no.<|end|>"
        "<|start|>assistant<|channel|>final<|message|>Reading the Makefile first.\n"
        "<read_file><path>Makefile</path></read_file><|return|>",
        "Reading the Makefile first.",
    ),
    (
        "<|channel|>analysis<|message|>Need the status.<|end|><|start|>assistant"
        "<|channel|>commentary to=functions.terminal_run <|constrain|>json"
        '<|message|>{"command": "git status"}<|call|>',
        "",
    ),
    (
        "I'll read the settings.<|tool_calls_section_begin|>\n<|tool_call_begin|>\n"
        'functions.read_file:0<|tool_call_argument_begin|>\n{"path": "a"}\n<|tool_call_end|>',
        "I'll read the settings.",
    ),
    (
        "Running the tests.\n<\uff5ctool\u2581calls\u2581begin\uff5c>"
        "<\uff5ctool\u2581call\u2581begin\uff5c>terminal_run",
        "Running the tests.",
    ),
]


@pytest.mark.parametrize(("reply", "prose"), CASES)
def test_prose_of_whole_reply(reply: str, prose: str) -> None:
    assert prose_of(reply) == prose


@pytest.mark.parametrize(("reply", "prose"), CASES)
@pytest.mark.parametrize("size", [1, 2, 3, 7])
def test_streamed_in_any_chunking_gives_the_same_prose(reply: str, prose: str, size: int) -> None:
    cut = ProseCut()
    released = "".join(cut.feed(reply[i : i + size]) for i in range(0, len(reply), size))
    released += cut.feed("", final=True)
    assert released.strip() == prose
    assert cut.prose == released


def test_nothing_of_an_action_is_ever_released_early() -> None:
    reply = "Fixing.\n<write_code><path>a.py</path><content>print(1)</content></write_code>"
    cut = ProseCut()
    for i in range(len(reply)):
        cut.feed(reply[i])
        assert "<" not in cut.prose
    assert cut.done


def test_plan_prose_stops_at_the_json_or_the_headings() -> None:
    plan_json = 'I\'ll do it in two steps.\n[{"title": "A"}, {"title": "B"}]'
    assert prose_of(plan_json, PLAN_LINE_STARTS) == "I'll do it in two steps."
    plan_md = "Here is the plan.\n\n## Write\n- write it\n## Run\n- run it"
    assert prose_of(plan_md, PLAN_LINE_STARTS) == "Here is the plan."
    fenced = 'Plan:\n```json\n[{"title": "A"}]\n```'
    assert prose_of(fenced, PLAN_LINE_STARTS) == "Plan:"


def test_narration_is_capped_and_cheap_on_a_huge_reply() -> None:
    from backend.agent.narration import PROSE_CAP

    assert len(prose_of("word " * 1_000_000)) <= PROSE_CAP
    assert len(prose_of("line\n" * 1_000_000)) <= PROSE_CAP
    cut = ProseCut()
    for _ in range(10_000):
        cut.feed("more words\n")
    assert cut.done and len(cut.prose) == PROSE_CAP
