"""`planact run` progress: failures whole, live command output line by line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from backend.actions import builtin_registry
from backend.cli.progress import Progress, final_line, progress_line
from backend.messages.deltas import DeltaEvent
from backend.messages.message import Message
from tests.support.deltas import delta

REGISTRY = builtin_registry()


def test_the_cause_of_an_error_is_never_cut() -> None:
    cause = "Traceback (most recent call last):\n" + "  frame\n" * 40 + "KeyError: 'colunm'"
    line = progress_line(
        REGISTRY, Message.build("terminal_run", f"Exit code: 1\nstderr:\n{cause}", status="failure")
    )
    assert line.startswith("[terminal_run FAIL] Exit code: 1")
    assert line.endswith("KeyError: 'colunm'")
    assert len(line) > 400
    err = progress_line(REGISTRY, Message.build("error", "x" * 1000, status="failure"))
    assert err == "[error FAIL] " + "x" * 1000


def test_routine_lines_stay_short() -> None:
    line = progress_line(REGISTRY, Message.build("write_code", "y" * 500))
    assert line == "[write_code ok] " + "y" * 160 + "…"


def test_live_output_is_printed_by_line_and_the_final_message_points_to_it() -> None:
    out: list[str] = []
    p = Progress(REGISTRY, out.append)
    running = Message.build("terminal_run", "make", status="running")
    p.message(running)
    p.delta(
        DeltaEvent.model_validate(
            {
                "uuid": running.uuid,
                "action_type": "terminal_run",
                "stream": "stdout",
                "text": "step 1\nstep",
            }
        )
    )
    assert out[-1] == "  | step 1"
    p.delta(
        DeltaEvent.model_validate(
            {
                "uuid": running.uuid,
                "action_type": "terminal_run",
                "stream": "stderr",
                "text": "warn\n",
            }
        )
    )
    p.delta(
        DeltaEvent.model_validate(
            {"uuid": running.uuid, "action_type": "terminal_run", "stream": "stdout", "text": " 2"}
        )
    )
    p.delta(delta(uuid="other", action_type="auto_reply", text="ignored"))
    assert out[1:] == ["  | step 1", "  ! warn"]
    final = Message.build(
        "terminal_run", "Exit code: 0\nstdout:\nstep 1\nstep 2\n", uuid=running.uuid
    )
    p.message(final)
    assert out[-2:] == ["  | step 2", "[terminal_run ok] Exit code: 0 (output above)"]


def test_a_failed_command_is_printed_whole_even_after_its_live_output() -> None:
    out: list[str] = []
    p = Progress(REGISTRY, out.append)
    running = Message.build("terminal_run", "make", status="running")
    p.message(running)
    p.delta(
        DeltaEvent(
            uuid=running.uuid, action_type="terminal_run", stream="stderr", text="KeyError: 'x'\n"
        )
    )
    p.message(
        Message.build(
            "terminal_run",
            "Exit code: 1\nstderr:\nKeyError: 'x'",
            uuid=running.uuid,
            status="failure",
        )
    )
    assert out[-1] == "[terminal_run FAIL] Exit code: 1\n    stderr:\n    KeyError: 'x'"


def test_a_command_is_printed_with_its_exit_code_and_its_streams() -> None:
    data = [
        {
            "command": "make",
            "exit_code": 2,
            "stdout": "cc -c a.c\n",
            "stderr": "a.c:1: error\n",
            "timed_out": False,
            "note": "",
        }
    ]
    line = progress_line(
        REGISTRY, Message.build("terminal_run", "Exit code: 2\n…", status="failure", json=data)
    )
    assert line == "[terminal_run FAIL] $ make  [exit 2]\n    | cc -c a.c\n    ! a.c:1: error"


def test_a_command_cut_short_by_a_stop_is_printed_as_its_words() -> None:
    text = "Stopped before it finished.\nOutput before that:\nstdout:\nhi\nstderr: (empty)"
    line = progress_line(REGISTRY, Message.build("terminal_run", text, status="failure"))
    assert line == "[terminal_run FAIL] " + text.replace("\n", "\n    ")


def test_each_way_a_run_ends_has_its_own_last_line() -> None:
    ws = Path("/w")
    assert final_line("r1", "completed", "", ws) == "run r1 completed; files in /w"
    assert final_line("r1", "stopped", "stopped", ws) == (
        "run r1 stopped before it finished; files in /w"
    )
    assert final_line("r1", "failed", "The model is down.\nmore", ws) == (
        "run r1 FAILED: The model is down.; files in /w"
    )
    assert final_line("r1", "failed", "", ws) == "run r1 FAILED; files in /w"
    assert "waiting for your answer" in final_line("r1", "waiting", "", ws)


def test_the_last_line_says_what_the_run_spent_with_the_cached_share() -> None:
    from backend.store.usage import figures

    spent = figures(5, 12_340, 410, 9_872, 0, 0.01234)
    assert final_line("r1", "completed", "", Path("/w"), spent) == (
        "run r1 completed; 12,340 tokens in (9,872 cached, 80%), 410 out, $0.0123; files in /w"
    )
    unknown = figures(1, 100, 5, 0, 0, None)
    assert final_line("r1", "failed", "x", Path("/w"), unknown) == (
        "run r1 FAILED: x; 100 tokens in (0 cached, 0%), 5 out, price unknown; files in /w"
    )
    # a run that made no model call says nothing of spending
    assert final_line("r1", "completed", "", Path("/w"), figures(0, 0, 0, 0, 0, None)) == (
        "run r1 completed; files in /w"
    )


def test_the_models_words_are_printed_whole_and_an_unusable_reply_says_so() -> None:
    from backend.agent.narration import narration_message
    from backend.agent.unusable import unusable_message

    refusal = "I can't help with that. " * 20
    assert (
        progress_line(REGISTRY, Message.build("auto_reply", refusal))
        == "[auto_reply] " + refusal.strip()
    )
    said = progress_line(REGISTRY, narration_message("I won't.\nNot this.", "t1", "u1"))
    assert said == "[thinking] I won't.\n    Not this."
    broken = "<terminal_run><cwd>.</cwd></terminal_run>"
    line = progress_line(
        REGISTRY, unusable_message("`terminal_run` was missing command", broken, stage="action")
    )
    assert line.startswith(
        "[unusable reply] The model's reply could not be used as an action: "
        "`terminal_run` was missing command."
    )
    assert line.endswith(broken)


def test_the_summary_names_its_files_and_passes_over_a_running_preview() -> None:
    files: list[dict[str, Any]] = [
        {"filepath": "app.py", "filename": "app.py", "url": "/api/files/c/app.py", "filesize": 3},
        {"preview": {"name": "app", "port": 8080, "path": "/", "url": "http://x/p/t/"}},
    ]
    line = progress_line(REGISTRY, Message.build("finish_summery", "Done.", json=files))
    assert line == "[summary] Done.\n[files] app.py"
    plan = [
        {"id": "1", "title": "Write", "description": "", "requirement": "", "status": "pending"}
    ]
    assert progress_line(REGISTRY, Message.build("plan", "", json=plan)) == "[plan] Write"
