"""Budgets, the stuck-loop detector, lean history and hostile replies, through the ASGI app
with a ScriptedLLM."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from backend.config import Settings
from backend.llm.base import Completion
from backend.llm.testing import ScriptedLLM
from tests.agent.scripts import finish, plan_reply, run, write
from tests.support.asgi import client_for, kinds, post_run
from tests.support.settings import make_settings

FORMAT_LESSON_MARKERS = ("Allowed actions", "<write_code>", "outside any code fence")


def _by_kind(messages: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [m for m in messages if m["meta"]["action_type"] == kind]


def _no_running_left(messages: list[dict[str, Any]]) -> None:
    finals = {m["uuid"] for m in messages if m["status"] != "running"}
    running = [
        m for m in messages if m["status"] == "running" and m["meta"]["action_type"] != "task"
    ]
    assert all(m["uuid"] in finals for m in running), running


def _run(settings: Settings, llm: ScriptedLLM, goal: str = "write code") -> tuple[Any, Any]:
    with client_for(settings, llm) as client:
        messages, end, _ = post_run(client, {"goal": goal, "mode": "agent"})
    assert llm.errors == []
    return messages, end


# ------------------------------------------------------------------------- budgets


def test_model_call_budget_ends_the_run_with_a_named_error(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, run_max_model_calls=3)
    llm = ScriptedLLM(
        [
            ("planning", plan_reply("Loop")),
            ("thinking", run("echo one")),
            ("thinking", run("echo two")),
            # a fourth call would be an unexpected extra call: the budget stops it first
        ]
    )
    messages, end = _run(settings, llm)
    assert end["status"] == "failed"
    assert len(llm.calls) == 3
    (error,) = _by_kind(messages, "error")
    text = error["content"]
    assert text.startswith("The run stopped: it reached RUN_MAX_MODEL_CALLS (3 model calls).")
    assert "Spent: 45 tokens" in text and "3 model calls" in text
    assert kinds(messages)[-2:] == ["error", "finish_summery"]
    assert "RUN_MAX_MODEL_CALLS" not in messages[-1]["content"]  # said once, in the error
    _no_running_left(messages)


def test_token_budget_ends_the_run_with_a_named_error(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, run_max_tokens=20)
    llm = ScriptedLLM([("planning", plan_reply("Loop")), ("thinking", run("echo one"))])
    messages, end = _run(settings, llm)
    assert end["status"] == "failed"
    (error,) = _by_kind(messages, "error")
    assert "RUN_MAX_TOKENS (20 tokens)" in error["content"]
    assert "Spent: 30 tokens" in error["content"]


def test_cost_budget_ends_the_run_with_a_named_error(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, run_max_cost_usd=0.05)
    priced = Completion(
        text=plan_reply("Loop"),
        finish_reason="stop",
        prompt_tokens=100,
        completion_tokens=20,
        cost=0.06,
    )
    llm = ScriptedLLM([("planning", priced)])
    messages, end = _run(settings, llm)
    assert end["status"] == "failed"
    (error,) = _by_kind(messages, "error")
    assert "RUN_MAX_COST_USD ($0.05)" in error["content"]
    assert "$0.0600" in error["content"]


def test_time_budget_is_checked_before_the_first_call(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, run_max_seconds=1e-9)
    llm = ScriptedLLM([])
    messages, end = _run(settings, llm)
    assert end["status"] == "failed"
    assert llm.calls == []
    (error,) = _by_kind(messages, "error")
    assert "RUN_MAX_SECONDS" in error["content"]


def test_budget_reached_at_the_summary_keeps_a_completed_run(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, run_max_model_calls=3)
    llm = ScriptedLLM(
        [
            ("planning", plan_reply("One", "Two")),
            ("thinking", finish("did one")),
            ("thinking", finish("did two")),
        ]
    )
    messages, end = _run(settings, llm)
    assert end["status"] == "completed"
    assert "did one" in messages[-1]["content"] and "did two" in messages[-1]["content"]


def test_the_question_carries_the_budget_for_the_ui(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, run_max_tokens=1234, run_max_cost_usd=None)
    llm = ScriptedLLM([("planning", plan_reply("One")), ("thinking", finish("ok"))])
    messages, _end = _run(settings, llm)
    question = messages[0]
    assert question["meta"]["action_type"] == "question"
    assert question["meta"]["json"] == [
        {
            "budget": {
                "max_tokens": 1234,
                "max_cost_usd": None,
                "max_seconds": 3600.0,
                "max_model_calls": 200,
            }
        }
    ]


# ------------------------------------------------------------------------- stuck loop


def test_stuck_loop_ends_the_task_with_a_message_saying_so(settings: Settings) -> None:
    llm = ScriptedLLM(
        [("planning", plan_reply("Fix it"))] + [("thinking", run("cat missing.txt"))] * 3
    )
    messages, end = _run(settings, llm)
    assert end["status"] == "failed"
    assert len(llm.calls) == 4
    (error,) = _by_kind(messages, "error")
    assert "repeated the same step 3 times with the same result" in error["content"]
    assert "cat missing.txt" in error["content"]
    # the second repeat was told so before the third
    assert "same action with the same result" in llm.calls[3].messages[-1]["content"]


def test_same_action_with_a_new_result_is_not_a_loop(settings: Settings) -> None:
    llm = ScriptedLLM(
        [("planning", plan_reply("Count"))]
        + [("thinking", run("echo x >> log.txt; wc -c < log.txt; cat log.txt"))] * 3
        + [("thinking", finish("counted"))]
    )
    _messages, end = _run(settings, llm)
    assert end["status"] == "completed"


# ------------------------------------------------------------------------- lean history


def test_older_observations_are_condensed_and_the_essentials_stay(settings: Settings) -> None:
    big = "".join(f"line {i}: " + "x" * 80 + "\n" for i in range(200))  # ~17 KB per file
    script: list[tuple[str, Any]] = [("planning", plan_reply("Big"))]
    for i in range(5):
        script.append(("thinking", write(f"f{i}.txt", big) + run(f"cat f{i}.txt")))
    script.append(("thinking", run("exit 7")))
    script.append(("thinking", run("echo fine")))
    script.append(("thinking", run("echo still fine")))
    script.append(("thinking", finish("done")))
    llm = ScriptedLLM(script)
    _messages, end = _run(settings, llm)
    assert end["status"] == "completed"
    last = llm.calls[-1].messages
    text = [str(m["content"]) for m in last]
    # the task and the system prompt are always there
    assert "Current task: Big" in text[1]
    # the last two turns are whole, older ones condensed
    assert text[-1].startswith("[terminal_run: echo still fine] ok")
    assert "(earlier reply, condensed) write_code f0.txt (200 lines)" in text[2]
    assert text[3].startswith("(condensed)")
    # every file written is still named; the latest error is kept
    joined = "\n".join(text)
    for i in range(5):
        assert f"write_code f{i}.txt" in joined
    assert "[terminal_run: exit 7] FAILED" in joined and "Exit code: 7" in joined
    # what is resent stays bounded: condensed past CONDENSE_AT (48 KB), far less than the
    # 5 x 2 x 17 KB of output so far
    assert sum(map(len, text)) < 50_000
    # and the biggest prompt of the task was the one just before a condensation
    sizes = [sum(len(str(m["content"])) for m in c.messages) for c in llm.calls[1:]]
    assert max(sizes) < 50_000 + 2 * 35_000


# ------------------------------------------------------------------------- error texts


def test_format_failure_error_is_short_and_never_shows_the_format_lessons(
    settings: Settings,
) -> None:
    llm = ScriptedLLM(
        [("planning", plan_reply("Try"))] + [("thinking", "Sure! I will write it now.")] * 3
    )
    messages, end = _run(settings, llm)
    assert end["status"] == "failed"
    (error,) = _by_kind(messages, "error")
    summary = messages[-1]
    for text in (error["content"], summary["content"]):
        for marker in FORMAT_LESSON_MARKERS:
            assert marker not in text
    assert "3 replies in a row with no usable action" in error["content"]
    assert "held no action" in error["content"]
    assert len(error["content"]) < 300  # was 1,081 characters of format instructions
    # said once: the summary does not repeat the error
    assert error["content"] not in summary["content"]
    task = _by_kind(messages, "task")[-1]
    assert all(marker not in str(task["meta"]) for marker in FORMAT_LESSON_MARKERS)
    # the model itself still got the lesson
    assert "Allowed actions" in llm.calls[-1].messages[-1]["content"]


# ------------------------------------------------------------------------- hostile replies


def test_lone_surrogate_is_a_format_error_and_leaves_nothing_running(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    llm = ScriptedLLM(
        [
            ("planning", plan_reply("Write")),
            (
                "thinking",
                "<think>hmm \ud800</think>"
                + write("s.txt", "bad \ud800 text\n")
                + '{"name": "write_code", "arguments": {"path": "j.txt", "content": "\\ud800"}}',
            ),
            ("thinking", write("s.txt", "good \U0001f600 text\n") + finish("wrote s.txt")),
        ]
    )
    messages, end = _run(settings, llm)
    assert end["status"] == "completed"
    _no_running_left(messages)
    assert not _by_kind(messages, "error")
    assert "invalid character" in llm.calls[2].messages[-1]["content"]
    ws = next((tmp_path / "workspace").rglob("s.txt"))
    assert ws.read_bytes() == "good \U0001f600 text\n".encode()
    assert not list((tmp_path / "workspace").rglob("j.txt"))
    thinking = _by_kind(messages, "thinking")
    assert thinking and "\ufffd" in thinking[0]["content"]


def test_chat_answer_with_a_lone_surrogate_is_stored(settings: Settings) -> None:
    llm = ScriptedLLM([("auto_reply", "caf\udce9 ok")])
    with client_for(settings, llm) as client:
        messages, end, _ = post_run(client, {"goal": "hi there", "mode": "chat"})
    assert end["status"] == "completed"
    assert messages[-1]["content"] == "caf\ufffd ok"


@pytest.mark.parametrize(
    ("reply", "problem"),
    [
        ('{"name": ' * 1000, "contains no action"),
        ("<write_code>" * 100_000, "limit is 1,000,000"),
        ("<write_code>\n" * 30_000, "contains no action"),
    ],
    ids=["nested-json-9KB", "openers-1.2MB", "openers-390KB"],
)
def test_hostile_reply_is_a_format_error_and_the_task_goes_on(
    settings: Settings, reply: str, problem: str
) -> None:
    llm = ScriptedLLM(
        [
            ("planning", plan_reply("Go")),
            ("thinking", reply),
            ("thinking", finish("recovered")),
        ]
    )
    messages, end = _run(settings, llm)
    assert end["status"] == "completed", [m["content"][:200] for m in messages[-3:]]
    assert problem in llm.calls[2].messages[-1]["content"]
    assert not _by_kind(messages, "error")


def test_plan_failure_error_never_shows_what_the_model_was_told(settings: Settings) -> None:
    llm = ScriptedLLM([("planning", "Let me think about it.")] * 3)
    messages, end = _run(settings, llm)
    assert end["status"] == "failed"
    (error,) = _by_kind(messages, "error")
    assert "answered without a plan (3 times" in error["content"]  # words, not a plan
    assert "JSON array" not in error["content"] and "JSON array" not in messages[-1]["content"]
    assert "JSON array" in llm.calls[-1].messages[-1]["content"]  # the model was told


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_nul_characters_never_reach_the_store(tmp_path: Path, database: str) -> None:
    """PostgreSQL text cannot hold NUL: model text and command output with one are shown
    with U+FFFD; a NUL in a command or path is a format error for the model."""
    overrides: dict[str, Any] = {}
    if database == "postgresql":
        from tests.pg import postgres_url, reset

        url = postgres_url()
        reset(url)
        overrides["database_url"] = url
    settings = make_settings(tmp_path, **overrides)
    llm = ScriptedLLM(
        [
            ("planning", plan_reply("Nul")),
            ("thinking", "<think>a\x00b</think>" + run("echo a\x00b")),
            ("thinking", run("printf 'x\\0y'") + finish("done \x00 here")),
        ]
    )
    messages, end = _run(settings, llm)
    assert end["status"] == "completed", [m["content"][:200] for m in messages[-3:]]
    assert "NUL character" in llm.calls[2].messages[-1]["content"]
    (result,) = [m for m in _by_kind(messages, "terminal_run") if m["status"] == "success"]
    assert "x\ufffdy" in result["content"]
    assert _by_kind(messages, "thinking")[0]["content"] == "a\ufffdb"
    assert messages[-1]["content"] == "done \ufffd here"
    _no_running_left(messages)
