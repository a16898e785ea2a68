"""`planact run` says what happened in people's words (the goal, an approval, an answer), and
shows a command whole before it is approved: its whitespace and lines made visible."""

from __future__ import annotations

import pytest

from backend.actions import builtin_registry
from backend.cli.progress import progress_line
from backend.cli.words import show_command, size_line
from backend.messages.message import Message, Status

REGISTRY = builtin_registry()

PADDED = "echo safe" + " " * 400 + "; touch HIDDEN1" + "\n" * 80 + "touch HIDDEN2"


def final(kind: str, content: str, status: Status) -> Message:
    return Message.build(kind, content, status=status)


@pytest.mark.parametrize(
    ("msg", "line"),
    [
        (final("question", "write a python script", "success"), "[goal] write a python script"),
        (final("approval", "Approved", "success"), "[approval] you approved it"),
        (
            final("approval", "Approved, with every later terminal action of this run", "success"),
            "[approval] you approved it, with every later terminal action of this run",
        ),
        (
            final("approval", "not on Fridays", "failure"),
            "[approval] you rejected it: not on Fridays",
        ),
        (
            final("approval", "Rejected (no reason given).", "failure"),
            "[approval] you rejected it (no reason given)",
        ),
        (
            final("approval", "Nobody approved it within 1 seconds (APPROVAL_TIMEOUT).", "failure"),
            "[approval] not approved: Nobody approved it within 1 seconds (APPROVAL_TIMEOUT).",
        ),
        (
            final("approval", "Stopped before it finished.", "failure"),
            "[approval] not approved: Stopped before it finished.",
        ),
        (final("ask_user", "8080", "success"), "[your answer] 8080"),
        (final("ask_user", "Which port?", "running"), "[the agent asks] Which port?"),
    ],
)
def test_the_goal_and_a_persons_answers_read_as_what_happened(msg: Message, line: str) -> None:
    assert progress_line(REGISTRY, msg) == line
    assert " ok]" not in line and "FAIL" not in line


def test_a_padded_command_is_shown_whole_with_its_whitespace_and_lines_counted() -> None:
    shown = show_command(PADDED)
    assert shown.split("\n") == [
        "   1  $ echo safe[400 spaces]; touch HIDDEN1",
        "2-80    [79 empty lines]",
        "  81    touch HIDDEN2",
    ]
    assert size_line(PADDED) == "81 lines, 517 characters"


def test_tabs_trailing_and_invisible_characters_are_named() -> None:
    assert show_command("ls") == "$ ls"
    assert show_command("a\tb\u200bc  d \r") == "$ a[1 tab]b[U+200B]c  d[1 space][CR]"
    assert show_command("ls\n") == "$ ls[newline at end]"
    assert show_command("a\n\nb").split("\n") == ["1  $ a", "2    ", "3    b"]
