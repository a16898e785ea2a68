"""`planact run` asks on its terminal: approvals (y / n / a / a reason) and the model's
questions, answered in the same process; no terminal, no asking; end of input stops."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

import pytest

from tests.agent.scripts import finish, plan_reply, run
from tests.e2e.pty_session import CTRL_C, CTRL_D, TerminalSession
from tests.e2e.server import PLANACT, server_env
from tests.fakellm import FakeModelServer

pytestmark = pytest.mark.e2e

PROMPT = 'Approve? y = yes, n = no, a = yes and to every later action of class "terminal"'


def ask_user(question: str) -> str:
    return f"<ask_user><question>{question}</question></ask_user>"


def thinking_calls(fake_model: FakeModelServer) -> list[str]:
    """The thinking requests' messages, as one text each."""
    return [json.dumps(c["messages"]) for c in fake_model.model.calls if c["stage"] == "thinking"]


class Terminal(Protocol):
    """Starts ``planact run ARGS`` on a terminal of its own (``extra``: more environment)."""

    def __call__(self, *args: str, stdout: Path | None = None, **extra: str) -> TerminalSession: ...


@pytest.fixture
def terminal(tmp_path: Path, fake_model: FakeModelServer) -> Iterator[Terminal]:
    sessions: list[TerminalSession] = []
    env = {**os.environ, **server_env(tmp_path, fake_model.base_url)}

    class Session(TerminalSession):
        def __init__(self, *args: str, stdout: Path | None = None, **extra: str) -> None:
            super().__init__(
                [*args, "--mode", "agent", "--workspace", str(tmp_path / "ws")],
                tmp_path,
                {**env, **extra},
                stdout=stdout,
            )
            sessions.append(self)

    yield Session
    for session in sessions:
        session.close()


def marker(tmp_path: Path) -> str | None:
    """The marker file's text in the run's workspace (None: not there)."""
    found = list((tmp_path / "ws").glob("user_*/Conversation_*/marker"))
    assert len(found) <= 1
    return found[0].read_text() if found else None


def test_an_approved_command_runs_once_after_the_person_says_yes(
    tmp_path: Path, fake_model: FakeModelServer, terminal: Terminal
) -> None:
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Mark")},
        {"stage": "thinking", "content": run("echo ran >> marker") + finish("marked")},
    )
    term = terminal("mark it", "--approval", "risky")
    at = term.expect("echo ran >> marker")
    term.expect(PROMPT, after=at)
    assert marker(tmp_path) is None  # waiting: the command has not run
    term.type("y\n")
    assert term.wait() == 0, term.output
    assert marker(tmp_path) == "ran\n"
    assert term.count("Approve?") == 1
    assert "[approval] you approved it" in term.output
    assert "completed" in term.output.splitlines()[-1]


def test_with_progress_sent_to_a_file_the_question_is_asked_on_the_terminal(
    tmp_path: Path, fake_model: FakeModelServer, terminal: Terminal
) -> None:
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Mark")},
        {"stage": "thinking", "content": run("echo ran >> marker") + finish("marked")},
    )
    progress = tmp_path / "progress.txt"
    term = terminal("mark it", "--approval", "risky", stdout=progress)
    at = term.expect(
        "The agent wants to run terminal_run [terminal], 1 line, 18 characters:\n"
        "    $ echo ran >> marker"
    )
    term.expect(PROMPT, after=at)
    term.type("y\n")
    assert term.wait() == 0, term.output
    assert marker(tmp_path) == "ran\n"
    printed = progress.read_text()
    assert "[approval] you approved it" in printed and "Approve?" not in printed
    assert re.search(r" completed; .*; files in ", printed.splitlines()[-1])


def test_keys_typed_before_the_question_answer_nothing(
    tmp_path: Path, fake_model: FakeModelServer, terminal: Terminal
) -> None:
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Mark")},
        {"stage": "thinking", "content": run("echo ran >> marker"), "hold": "reply"},
        {"stage": "thinking", "content": finish("did not mark")},
    )
    term = terminal("mark it", "--approval", "risky")
    term.expect("[task …] Mark")
    term.type("y\n")  # while the run works: before anything is asked
    fake_model.release("reply")
    at = term.expect(PROMPT)
    term.type("no typing ahead\n")
    assert term.wait() == 0, term.output
    assert marker(tmp_path) is None
    assert "[approval] you rejected it: no typing ahead" in term.output[at:]


@pytest.mark.parametrize("keys", [["not on this machine\n"], ["n\n", "not on this machine\n"]])
def test_a_refusal_and_its_reason_reach_the_model(
    tmp_path: Path,
    fake_model: FakeModelServer,
    terminal: Terminal,
    keys: list[str],
) -> None:
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Mark")},
        {"stage": "thinking", "content": run("echo ran >> marker")},
        {"stage": "thinking", "content": finish("did not mark")},
    )
    term = terminal("mark it", "--approval", "always")
    at = term.expect(PROMPT)
    for key in keys:
        term.type(key)
        if key == "n\n":
            at = term.expect("Why not?", after=at)
    assert term.wait() == 0, term.output
    assert marker(tmp_path) is None
    first, second = thinking_calls(fake_model)
    assert "not on this machine" not in first
    assert "not on this machine" in second
    assert "[approval] you rejected it: not on this machine" in term.output


def test_approve_all_lets_later_commands_of_the_class_run_without_asking(
    tmp_path: Path, fake_model: FakeModelServer, terminal: Terminal
) -> None:
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Mark twice")},
        {"stage": "thinking", "content": run("echo one >> marker")},
        {"stage": "thinking", "content": run("echo two >> marker") + finish("marked twice")},
    )
    term = terminal("mark twice", "--approval", "risky")
    term.expect(PROMPT)
    term.type("a\n")
    assert term.wait() == 0, term.output
    assert marker(tmp_path) == "one\ntwo\n"
    assert term.count("Approve?") == 1
    assert "echo two >> marker" in term.output


def test_the_model_asks_and_the_answer_typed_reaches_it(
    tmp_path: Path, fake_model: FakeModelServer, terminal: Terminal
) -> None:
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Pick a colour")},
        {"stage": "thinking", "content": ask_user("Which colour should the button be?")},
        {"stage": "thinking", "content": finish("the button is teal")},
    )
    term = terminal("style the button")  # --approval never: only the question is asked
    at = term.expect("The agent asks:\n    Which colour should the button be?")
    term.expect("Your answer: ", after=at)
    term.type("teal, like the logo\n")
    assert term.wait() == 0, term.output
    first, second = thinking_calls(fake_model)
    assert "<ask_user>" in first  # offered: there is a terminal
    assert "teal, like the logo" in second
    assert "Approve?" not in term.output


@pytest.mark.parametrize("key", [CTRL_D, CTRL_C])
def test_ending_input_at_the_prompt_stops_the_run(
    tmp_path: Path,
    fake_model: FakeModelServer,
    terminal: Terminal,
    key: bytes,
) -> None:
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Mark")},
        {"stage": "thinking", "content": run("echo ran >> marker") + finish("marked")},
    )
    term = terminal("mark it", "--approval", "risky")
    term.expect(PROMPT)
    term.type(key)
    assert term.wait() == 1, term.output
    assert term.hung_up  # nothing left holding the terminal: no process left running
    last = term.output.strip().splitlines()[-1]
    assert last.startswith("run ") and " stopped before it finished; " in last, term.output
    assert "; files in " in last, term.output
    assert "[approval] not approved: Stopped" in term.output
    assert "[stop FAIL] The run was stopped." in term.output
    assert marker(tmp_path) is None
    assert len(thinking_calls(fake_model)) == 1


def test_a_wait_that_times_out_drops_its_prompt_and_the_run_goes_on(
    tmp_path: Path, fake_model: FakeModelServer, terminal: Terminal
) -> None:
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Mark")},
        {"stage": "thinking", "content": run("echo ran >> marker")},
        {"stage": "thinking", "content": finish("went on without it")},
    )
    term = terminal("mark it", "--approval", "risky", APPROVAL_TIMEOUT="1", LEASE_SECONDS="2")
    at = term.expect(PROMPT)
    at = term.expect("(no longer asked: answered elsewhere, timed out or stopped)", after=at)
    term.expect("[approval] not approved: Nobody approved it within 1 seconds", after=at)
    assert term.wait() == 0, term.output
    assert marker(tmp_path) is None
    assert "Nobody approved it within 1 seconds" in thinking_calls(fake_model)[1]


def test_ending_input_at_a_question_stops_the_run(
    tmp_path: Path, fake_model: FakeModelServer, terminal: Terminal
) -> None:
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Pick")},
        {"stage": "thinking", "content": ask_user("Which one?")},
    )
    term = terminal("pick one")
    term.expect("Your answer: ")
    term.type("\n")  # an empty answer is asked again
    at = term.expect("Type an answer (Ctrl-D stops the run).")
    term.expect("Your answer: ", after=at)
    term.type(CTRL_D)
    assert term.wait() == 1, term.output
    assert re.search(
        r" stopped before it finished; .*files in ", term.output.strip().splitlines()[-1]
    )


def no_terminal_run(
    tmp_path: Path, fake_model: FakeModelServer, *args: str, **env: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PLANACT, "run", *args],
        cwd=tmp_path,
        env={**os.environ, **server_env(tmp_path, fake_model.base_url), **env},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("args", "env", "source"),
    [
        (["--approval", "risky"], {}, "--approval risky"),
        (["--approval", "always"], {"APPROVAL_MODE": "never"}, "--approval always"),
        ([], {"APPROVAL_MODE": "risky"}, "APPROVAL_MODE=risky"),
    ],
)
def test_without_a_terminal_a_run_that_must_ask_is_refused_before_it_starts(
    tmp_path: Path,
    fake_model: FakeModelServer,
    args: list[str],
    env: dict[str, str],
    source: str,
) -> None:
    proc = no_terminal_run(tmp_path, fake_model, "goal", *args, **env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    said = proc.stderr.strip()
    assert said.startswith(f"planact: {source} asks on the terminal")
    assert "stdin is not a terminal" in said and "--approval never" in said
    assert len(said.splitlines()) == 1 and "Traceback" not in said
    assert proc.stdout == ""
    assert fake_model.model.calls == []
    assert not (tmp_path / "planact.db").exists()  # no run was created


def test_without_a_terminal_the_model_is_not_offered_to_ask(
    tmp_path: Path, fake_model: FakeModelServer
) -> None:
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Write")},
        {"stage": "thinking", "content": run("echo ran >> marker") + finish("done")},
    )
    proc = no_terminal_run(tmp_path, fake_model, "mark it", "--mode", "agent")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (first,) = thinking_calls(fake_model)
    assert "<ask_user>" not in first
    assert "Approve?" not in proc.stdout


def test_an_approval_mode_not_offered_is_refused(
    tmp_path: Path, fake_model: FakeModelServer
) -> None:
    proc = no_terminal_run(tmp_path, fake_model, "goal", "--approval", "sometimes")
    assert proc.returncode == 2
    assert "--approval: invalid choice: 'sometimes'" in proc.stderr
    assert "'never', 'risky', 'always'" in proc.stderr
    assert fake_model.model.calls == []
