"""`planact run` asks on a terminal: what each typed line means (a real pseudo-terminal)."""

from __future__ import annotations

import asyncio
import io
import os
from collections.abc import Iterator
from typing import Any

import pytest

from backend.actions import builtin_registry
from backend.cli.waits import (
    REASON_MAX,
    Answer,
    Terminal,
    ask_approval,
    ask_question,
    needs_terminal,
    show_wait,
)
from backend.messages.message import Message
from backend.messages.payloads import ApprovalRequest, ApprovalShown, plain_items
from backend.waits.digest import action_digest

REGISTRY = builtin_registry()


@pytest.fixture
def tty() -> Iterator[tuple[int, int]]:
    master, slave = os.openpty()
    yield master, slave
    os.close(master)
    os.close(slave)


def request(
    action: str, klass: str, params: dict[str, str], shown: ApprovalShown | None = None
) -> list[Any]:
    """An approval's meta.json, as the server writes it (backend/agent/asking.py)."""
    return plain_items(
        [
            ApprovalRequest(
                action_type=action,
                class_=klass,
                params=params,
                digest=action_digest(action, params),
                shown=shown or ApprovalShown(whole=True, note="", lines=1, chars=1),
            )
        ]
    )


def approval(klass: str = "terminal", content: str = "touch marker") -> Message:
    return Message.build(
        "approval", content, status="running", json=request("terminal_run", klass, {})
    )


def typed(tty: tuple[int, int], *lines: bytes) -> tuple[Terminal, list[str]]:
    master, slave = tty
    for line in lines:
        os.write(master, line)
    shown: list[str] = []
    return Terminal(slave, write=shown.append), shown


@pytest.mark.parametrize(
    ("keys", "answer"),
    [
        (b"y\n", Answer("approve")),
        (b"YES\n", Answer("approve")),
        (b"a\n", Answer("approve_all")),
        (b"n\nthe tests touch prod\n", Answer("reject", "the tests touch prod")),
        (b"n\n\n", Answer("reject", "")),
        (b"use a temp dir instead\n", Answer("reject", "use a temp dir instead")),
    ],
)
def test_each_answer_of_an_approval(tty: tuple[int, int], keys: bytes, answer: Answer) -> None:
    term, shown = typed(tty, keys)
    said: list[str] = []
    assert asyncio.run(ask_approval(term, approval(), said.append)) == answer
    assert 'a = yes and to every later action of class "terminal"' in shown[0]
    assert said == []


def test_an_empty_line_asks_again(tty: tuple[int, int]) -> None:
    term, shown = typed(tty, b"\n", b"  \n", b"y\n")
    said: list[str] = []
    assert asyncio.run(ask_approval(term, approval(), said.append)) == Answer("approve")
    assert len([s for s in shown if s.startswith("Approve?")]) == 3
    assert said == ["Type y, n, a, or a reason to refuse (Ctrl-D stops the run)."] * 2


def test_a_reason_over_the_limit_is_refused_and_asked_again(tty: tuple[int, int]) -> None:
    long = b"x" * (REASON_MAX + 1)
    term, _ = typed(tty, long + b"\n", b"n\n", long + b"\n", b"too risky\n")
    said: list[str] = []
    assert asyncio.run(ask_approval(term, approval(), said.append)) == Answer("reject", "too risky")
    assert said == [f"A reason is at most 4,000 characters; this one has {REASON_MAX + 1:,}."] * 2


@pytest.mark.parametrize("keys", [b"\x04", b"n\n\x04"])
def test_end_of_input_at_a_prompt_means_stop(tty: tuple[int, int], keys: bytes) -> None:
    term, _ = typed(tty, keys)
    assert asyncio.run(ask_approval(term, approval(), lambda _: None)) is None


def test_a_question_takes_one_line_and_asks_again_when_empty(tty: tuple[int, int]) -> None:
    term, shown = typed(tty, b"\n", b"  blue, please \n")
    said: list[str] = []
    assert asyncio.run(ask_question(term, said.append)) == Answer(answer="blue, please")
    assert shown == ["Your answer: ", "Your answer: "]
    assert said == ["Type an answer (Ctrl-D stops the run)."]
    term, _ = typed(tty, b"\x04")
    assert asyncio.run(ask_question(term, said.append)) is None


def test_what_a_person_reads_before_answering() -> None:
    edit = Message.build("approval", "--- a/app.py\n+++ b/app.py\n@@\n-x\n+y", status="running")
    edit.meta.json_ = request("edit_file", "edits", {})
    edit.meta.filepath = "app.py"
    assert show_wait(edit, REGISTRY) == (
        "The agent wants to run edit_file (app.py) [edits]:\n"
        "    --- a/app.py\n    +++ b/app.py\n    @@\n    -x\n    +y"
    )
    question = Message.build("ask_user", "Which port?", status="running")
    assert show_wait(question, REGISTRY) == "The agent asks:\n    Which port?"


def test_only_never_runs_without_a_terminal(tty: tuple[int, int]) -> None:
    not_a_tty = io.StringIO()
    assert needs_terminal("never", stdin=not_a_tty) == ""
    for mode in ("risky", "always"):
        said = needs_terminal(mode, stdin=not_a_tty)
        assert said.startswith(f"planact: --approval {mode} asks on the terminal")
        assert "not a terminal" in said and "--approval never" in said
    said = needs_terminal("risky", "APPROVAL_MODE=risky", stdin=not_a_tty)
    assert said.startswith("planact: APPROVAL_MODE=risky asks on the terminal")
    with os.fdopen(os.dup(tty[1])) as terminal:
        assert needs_terminal("always", stdin=terminal) == ""


def test_a_command_is_shown_whole_with_its_size_before_it_is_approved() -> None:
    padded = "echo safe" + " " * 400 + "; touch HIDDEN1" + "\n" * 80 + "touch HIDDEN2"
    params = {"command": padded, "cwd": "src"}
    msg = Message.build(
        "approval", padded, status="running", json=request("terminal_run", "terminal", params)
    )
    assert show_wait(msg, REGISTRY).split("\n") == [
        "The agent wants to run terminal_run [terminal], 81 lines, 517 characters:",
        "       1  $ echo safe[400 spaces]; touch HIDDEN1",
        "    2-80    [79 empty lines]",
        "      81    touch HIDDEN2",
        "    (in src)",
    ]


def cut_approval() -> Message:
    content = "".join(f"line {i}\n" for i in range(1, 6))
    msg = Message.build("approval", "--- a/big.txt\n+++ b/big.txt\n@@\n+line 1\n[… cut]\n")
    msg.status = "running"
    note = "Cut after line 4 of the diff: 4 more lines (28 characters) are not shown here."
    shown = ApprovalShown(whole=False, note=note, lines=5, chars=len(content))
    params = {"path": "big.txt", "content": content}
    msg.meta.json_ = request("write_code", "edits", params, shown)
    msg.meta.filepath = "big.txt"
    return msg


def test_what_an_approval_left_out_is_said_and_s_prints_it_whole(tty: tuple[int, int]) -> None:
    msg = cut_approval()
    assert show_wait(msg, REGISTRY).endswith(
        "\nNot all shown: Cut after line 4 of the diff: 4 more lines (28 characters) are not "
        "shown here. Type s to print the whole of it."
    )
    term, shown = typed(tty, b"s\n", b"y\n")
    said: list[str] = []
    assert asyncio.run(ask_approval(term, msg, said.append)) == Answer("approve")
    assert "s = show it whole" in shown[0]
    assert said == ["\n".join(f"    line {i}" for i in range(1, 6))]
    # without a cut, s is a reason like any other
    term, shown = typed(tty, b"s\n")
    assert asyncio.run(ask_approval(term, approval(), said.append)) == Answer("reject", "s")
    assert "s = show" not in shown[0]
