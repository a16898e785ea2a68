"""Lean history: what older turns look like when resent, and the stuck-loop count."""

from __future__ import annotations

import itertools

from backend.actions.model import Action
from backend.agent.service_note import NOTE_HEAD
from backend.agent.transcript import Outcome, Transcript, Turn, stored_turn, turn_from

HEAD = [{"role": "system", "content": "S"}, {"role": "user", "content": "TASK"}]


def _turn(i: int, output: str, verdict: str = "ok") -> Turn:
    action = Action("terminal_run", {"command": f"step {i}"})
    return Turn(
        reply=f"<terminal_run><command>step {i}</command></terminal_run>",
        actions=[action],
        outcomes=[Outcome(f"terminal_run: step {i}", verdict, output)],
        footer="All actions ran.",
    )


def _prefix(a: list[dict[str, object]], b: list[dict[str, object]]) -> bool:
    return b[: len(a)] == a


def test_each_prompt_extends_the_last_but_at_a_condensation() -> None:
    t = Transcript(list(HEAD), condense_at=50_000)
    prompts = []
    for i in range(30):
        t.add(_turn(i, "o" * 4_000))
        prompts.append(t.messages())
    breaks = [i for i, (a, b) in enumerate(itertools.pairwise(prompts), 1) if not _prefix(a, b)]
    # ~4 KB a turn, condensed past 50 KB: a break every dozen turns, never one per call
    assert 1 <= len(breaks) <= 3, breaks
    assert all(b - a >= 8 for a, b in itertools.pairwise(breaks))
    sizes = [sum(len(str(m["content"])) for m in p) for p in prompts]
    assert max(sizes) < 50_000 + 2 * 4_200  # bounded: a condensation brings it back down
    # the output is kept whole until a condensation
    assert prompts[5][-1]["content"].startswith("[terminal_run: step 5] ok\n" + "o" * 4_000)
    assert prompts[5][3]["content"].startswith("[terminal_run: step 0] ok\n" + "o" * 4_000)


def test_a_condensation_condenses_many_turns_at_once() -> None:
    t = Transcript(list(HEAD), condense_at=20_000)
    for i in range(5):
        t.add(_turn(i, "o" * 4_500))
    msgs = t.messages()
    # 5 x ~4.6 KB passed 20 KB at the fifth turn: turns 0-2 condensed, 3-4 whole
    condensed = [m for m in msgs if str(m["content"]).startswith("(")]
    assert len(condensed) == 6
    assert msgs[-1]["content"].startswith("[terminal_run: step 4] ok")
    assert msgs[-3]["content"].startswith("[terminal_run: step 3] ok")


def test_a_rebuilt_transcript_sends_the_same_prompt() -> None:
    t = Transcript(list(HEAD), condense_at=10_000)
    for i in range(9):
        t.add(_turn(i, "o" * 3_000, verdict="FAILED" if i == 4 else "ok"))
    again = Transcript(list(HEAD), condense_at=10_000)
    again.turns = [turn_from(stored_turn(turn)) for turn in t.turns]
    assert again.messages() == t.messages()


def test_window_whole_older_condensed_latest_error_kept() -> None:
    t = Transcript(list(HEAD), condense_at=5_000)
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
    t = Transcript(list(HEAD), condense_at=100)
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


def test_old_unusable_turns_are_left_out_once_condensed() -> None:
    t = Transcript(list(HEAD), condense_at=100)
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


def test_the_next_task_goes_on_from_this_one_while_it_is_small() -> None:
    from backend.agent.state import RunState
    from backend.agent.transcript import carried

    t = Transcript(list(HEAD), condense_at=20_000)
    t.add(_turn(0, "o" * 1_000))
    went_on = carried(t, "<finish><message>done</message></finish>")
    assert went_on is not None
    assert went_on[: len(t.messages())] == t.messages()
    assert went_on[-1] == {"role": "assistant", "content": went_on[-1]["content"]}
    # a resumed run reads it back from its checkpoint
    state = RunState.model_validate(
        {
            "run_id": "r",
            "conversation_id": "c",
            "user_id": "u",
            "goal": "g",
            "mode": "agent",
            "runtime": "local",
            "workspace": "/w",
        }
    )
    state.carried = went_on
    assert RunState.from_json(state.to_json()).carried == went_on
    # past half the threshold the next task starts over instead
    t.add(_turn(1, "o" * 10_000))
    assert carried(t, "done") is None


def test_the_threshold_follows_the_models_input_window() -> None:
    from backend.agent import transcript
    from backend.llm.prices import input_window

    window = input_window("openai/gpt-4o-mini")
    assert window is not None and window >= 100_000
    assert transcript.condense_at(window) == transcript.CONDENSE_AT
    # a model the table does not know: the small threshold (a local model's window)
    assert input_window("openai/no-such-model") is None
    assert transcript.condense_at(None) == transcript.SMALL_CONDENSE_AT
    # a small window: at most WINDOW_SHARE of it
    assert transcript.condense_at(16_384) == int(16_384 * 4 * transcript.WINDOW_SHARE)
