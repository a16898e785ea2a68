"""Lean history: what older turns look like when resent, and the stuck-loop count."""

from __future__ import annotations

import itertools

from backend.actions.model import Action
from backend.agent.service_note import NOTE_HEAD
from backend.agent.transcript import Outcome, Transcript, Turn

HEAD = [{"role": "system", "content": "S"}, {"role": "user", "content": "TASK"}]


def _turn(i: int, output: str, verdict: str = "ok") -> Turn:
    action = Action("terminal_run", {"command": f"step {i}"})
    return Turn(
        reply=f"<terminal_run><command>step {i}</command></terminal_run>",
        actions=[action],
        outcomes=[Outcome(f"terminal_run: step {i}", verdict, output)],
        footer="All actions ran.",
    )


def test_resent_size_grows_linearly_not_with_the_square() -> None:
    t = Transcript(list(HEAD))
    sizes = []
    for i in range(12):
        t.add(_turn(i, "o" * 10_000))
        sizes.append(sum(len(m["content"]) for m in t.messages()))
    # each new turn adds a condensed line, not another 10 KB
    growth = [b - a for a, b in itertools.pairwise(sizes[2:])]
    assert max(growth) < 1_000
    assert sizes[-1] < 2 * 10_000 + 12 * 1_000


def test_window_whole_older_condensed_latest_error_kept() -> None:
    t = Transcript(list(HEAD))
    t.add(_turn(0, "E" * 5_000, verdict="FAILED"))
    for i in range(1, 4):
        t.add(_turn(i, "fine"))
    msgs = t.messages()
    assert msgs[:2] == HEAD
    assert msgs[2]["content"] == "(earlier reply, condensed) terminal_run `step 0`"
    assert msgs[3]["content"].startswith("(condensed) [terminal_run: step 0] FAILED: EEE")
    assert 1_900 < len(msgs[3]["content"]) < 2_100  # the latest error, up to ERROR_CHARS
    assert msgs[-2]["content"].startswith("<terminal_run>")
    assert msgs[-1]["content"] == "[terminal_run: step 3] ok\nfine\n\nAll actions ran."


def test_read_file_results_are_dropped_when_old_and_files_stay_named() -> None:
    t = Transcript(list(HEAD))
    content = "x\n" * 50
    t.add(
        Turn(
            reply="r",
            actions=[Action("write_code", {"path": "a.py", "content": content})],
            outcomes=[Outcome("write_code a.py", "ok", "File a.py written successfully.")],
        )
    )
    t.add(
        Turn(
            reply="r",
            actions=[Action("read_file", {"path": "a.py"})],
            outcomes=[Outcome("read_file a.py", "ok", content)],
        )
    )
    t.add(_turn(2, "a"))
    t.add(_turn(3, "b"))
    joined = "\n".join(m["content"] for m in t.messages())
    assert "write_code a.py (50 lines)" in joined
    assert "(100 characters read; read the file again to see them)" in joined


def test_an_unusable_reply_is_resent_as_the_models_and_the_note_as_the_services() -> None:
    t = Transcript(list(HEAD))
    t.add(Turn(reply="I will now think.", format_error="LESSON", brief_error="no action"))
    msgs = t.messages()
    assert msgs[2] == {"role": "assistant", "content": "I will now think."}
    assert msgs[3]["role"] == "user"
    assert msgs[3]["content"] == f"{NOTE_HEAD}\nFormat error: LESSON"
    assert not any("no usable action" in m["content"] for m in msgs if m["role"] == "assistant")


def test_an_empty_unusable_reply_leaves_no_turn_in_the_models_mouth() -> None:
    t = Transcript(list(HEAD))
    t.add(Turn(reply="  ", format_error="LESSON", brief_error="no action"))
    assert [m["role"] for m in t.messages()] == ["system", "user", "user"]


def test_old_unusable_turns_are_left_out_once_they_leave_the_window() -> None:
    t = Transcript(list(HEAD))
    t.add(Turn(reply="garbage", format_error="LONG LESSON " * 100, brief_error="no action"))
    t.add(_turn(1, "a"))
    t.add(_turn(2, "b"))
    joined = "\n".join(m["content"] for m in t.messages())
    assert "garbage" not in joined and "LESSON" not in joined
    assert [m["role"] for m in t.messages()] == ["system", "user", *["assistant", "user"] * 2]


def test_repeats_count_same_action_same_result_ignoring_numbers() -> None:
    t = Transcript(list(HEAD))
    t.add(_turn(1, "took 0.31s"))
    assert t.repeats() == 1
    t.add(_turn(1, "took 0.29s"))
    assert t.repeats() == 2
    t.add(_turn(1, "took 0.30s, new error"))
    assert t.repeats() == 1
    t.add(_turn(2, "took 0.30s, new error"))
    assert t.repeats() == 1
