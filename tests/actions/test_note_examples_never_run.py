"""A reply that repeats the service's own notes: their examples are not actions."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.actions import FormatError, parse_actions
from backend.actions.registry import builtin_registry
from backend.agent.prompts import render

# the actions every task is offered (the format note shows each one's example)
ACTIONS = builtin_registry().vocabulary.offered

# the note the task loop sends after a reply with no action, as a weak model echoed it
ECHOED_NOTE = (Path(__file__).parent / "data" / "repeats_the_format_note.txt").read_text()


def test_a_reply_repeating_the_format_note_runs_none_of_its_examples() -> None:
    assert all(spec.example in ECHOED_NOTE for spec in ACTIONS.values())  # all six are there
    with pytest.raises(FormatError) as info:
        parse_actions(ECHOED_NOTE)
    assert info.value.user == "a reply repeated the service's format note (nothing from it was run)"
    assert "examples, which are not actions" in str(info.value)
    assert not info.value.words


def test_a_reply_repeating_the_thinking_prompt_runs_none_of_its_examples() -> None:
    prompt = render(
        "thinking",
        actions=list(ACTIONS.values()),
        tool_notes=[],
        workspace_note="the workspace",
        timeout=60,
    )
    with pytest.raises(FormatError):
        parse_actions(prompt)


def test_the_same_text_written_as_the_models_own_action_runs() -> None:
    example = ACTIONS["terminal_run"].example
    (action,) = parse_actions(f"Let me run it.\n{example}")
    assert action.type == "terminal_run" and action.params["command"] == "python3 src/app.py"


def test_an_action_after_the_repeated_note_is_the_only_one_run() -> None:
    actions = parse_actions(ECHOED_NOTE + "\n<read_file><path>notes.txt</path></read_file>")
    assert [(a.type, a.params) for a in actions] == [("read_file", {"path": "notes.txt"})]
