"""When the model answers with something that is neither a plan nor an action, the person
sees what it said; an answer in words (a refusal) and a format problem look different, and
what the model is told to correct its format never reaches the person."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from starlette.testclient import TestClient

from backend.agent.service_note import NOTE_HEAD
from backend.app import create_app
from backend.config import Settings
from backend.llm.base import Completion
from backend.llm.testing import ScriptedLLM
from tests.agent.scripts import finish, plan_reply, run
from tests.sse_client import collect

REFUSAL = "I can't help with deleting other people's files: that would harm them."
BROKEN_PLAN = 'Here is my plan:\n[{"title": "Write the script", "description": '
# a command action without its command: the model got the action wrong
BROKEN_ACTION = "Let me run it.\n<terminal_run><cwd>.</cwd></terminal_run>"
LESSONS = ("JSON array of tasks", "Allowed actions", "Reply with")


def post(settings: Settings, llm: ScriptedLLM) -> tuple[list[dict[str, Any]], Any]:
    with (
        TestClient(create_app(settings, llm=llm)) as client,
        client.stream("POST", "/api/agent/run", json={"goal": "do it", "mode": "agent"}) as resp,
    ):
        return collect(resp.iter_lines())


def kinds(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(m["meta"]["action_type"], m["type"]) for m in messages]


def unusable(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in messages if m["type"] == "unusable_reply"]


def test_a_planner_refusal_is_shown_as_its_answer(settings: Settings) -> None:
    llm = ScriptedLLM(
        [("planning", REFUSAL), ("planning", plan_reply("Look")), ("thinking", finish("ok"))]
    )
    messages, end = post(settings, llm)
    assert end["status"] == "completed"
    replies = [m for m in messages if m["meta"]["action_type"] == "auto_reply"]
    assert [r["content"] for r in replies] == [REFUSAL, "I'll do it."]
    assert replies[0]["uuid"] != replies[1]["uuid"]
    assert not unusable(messages)  # words, not a format problem


def test_a_planner_that_only_refuses_ends_the_run_saying_so(settings: Settings) -> None:
    llm = ScriptedLLM([("planning", REFUSAL)] * 3)
    messages, end = post(settings, llm)
    assert end["status"] == "failed"
    assert [m["content"] for m in messages if m["meta"]["action_type"] == "auto_reply"] == [
        REFUSAL
    ] * 3
    (error,) = [m for m in messages if m["meta"]["action_type"] == "error"]
    assert "answered without a plan" in error["content"]
    assert not any(lesson in error["content"] for lesson in LESSONS)


def test_a_plan_the_agent_cannot_read_is_shown_as_a_format_problem(settings: Settings) -> None:
    llm = ScriptedLLM(
        [("planning", BROKEN_PLAN), ("planning", plan_reply("Look")), ("thinking", finish("ok"))]
    )
    messages, end = post(settings, llm)
    assert end["status"] == "completed"
    (shown,) = unusable(messages)
    assert shown["meta"]["action_type"] == "thinking"
    assert shown["content"].startswith(
        "The model's reply could not be used as a plan: its task list did not parse."
    )
    assert shown["meta"]["content"] == BROKEN_PLAN.strip()
    assert BROKEN_PLAN.strip() in shown["content"]
    assert not any(lesson in shown["content"] for lesson in LESSONS)  # the lesson is the model's
    assert "JSON array of tasks" in llm.calls[1].messages[-1]["content"]
    replies = [m["content"] for m in messages if m["meta"]["action_type"] == "auto_reply"]
    assert replies == ["I'll do it."]  # the broken reply's prose is not an answer


def test_a_broken_action_is_shown_as_a_format_problem_and_a_refusal_as_words(
    settings: Settings,
) -> None:
    llm = ScriptedLLM(
        [
            ("planning", plan_reply("Run")),
            ("thinking", BROKEN_ACTION),
            ("thinking", REFUSAL),
            ("thinking", run("true") + finish("ran")),
        ]
    )
    messages, end = post(settings, llm)
    assert end["status"] == "completed"
    (shown,) = unusable(messages)
    task_id = shown["meta"]["task_id"]
    assert task_id and shown["status"] == "success"
    assert shown["content"].startswith(
        "The model's reply could not be used as an action: `terminal_run` was missing command."
    )
    assert shown["meta"]["content"] == BROKEN_ACTION
    assert not any(lesson in shown["content"] for lesson in LESSONS)
    narration = [m for m in messages if m["type"] == "narration"]
    assert [m["content"] for m in narration] == [REFUSAL]  # the refusal: the agent's words
    assert narration[0]["meta"]["task_id"] == task_id
    assert kinds(messages).index(("thinking", "unusable_reply")) < kinds(messages).index(
        ("thinking", "narration")
    )


NO_PLAN = Path(__file__).parents[1] / "agent" / "data" / "no_plan"


def test_code_holding_a_list_is_no_plan_and_the_run_ends_saying_so(settings: Settings) -> None:
    code = (NO_PLAN / "python_code_with_a_list.txt").read_text()
    note = (NO_PLAN / "repeats_the_services_note.txt").read_text()
    llm = ScriptedLLM([("planning", code), ("planning", note), ("planning", code)])
    messages, end = post(settings, llm)
    assert end["status"] == "failed"
    assert not [m for m in messages if m["meta"]["action_type"] in ("plan", "task")]
    (error,) = [m for m in messages if m["meta"]["action_type"] == "error"]
    assert error["content"].startswith("The model produced no plan")
    assert len(llm.calls) == 3


def test_the_services_note_reaches_the_model_as_the_services_never_as_its_own(
    settings: Settings,
) -> None:
    code = (NO_PLAN / "python_code_with_a_list.txt").read_text()
    llm = ScriptedLLM(
        [
            ("planning", code),
            ("planning", plan_reply("Run")),
            ("thinking", BROKEN_ACTION),
            ("thinking", run("true") + finish("ran")),
        ]
    )
    _, end = post(settings, llm)
    assert end["status"] == "completed"
    replan = llm.calls[1].messages
    assert replan[-2] == {"role": "assistant", "content": code.strip()}  # its own words
    assert replan[-1]["role"] == "user" and replan[-1]["content"].startswith(NOTE_HEAD)
    again = llm.calls[3].messages
    assert again[-2] == {"role": "assistant", "content": BROKEN_ACTION}
    assert again[-1]["role"] == "user" and again[-1]["content"].startswith(NOTE_HEAD)
    for call in llm.calls:
        said = [m["content"] for m in call.messages if m["role"] == "assistant"]
        assert not any(NOTE_HEAD in s or "could not be read" in s for s in said)
        assert not any("no usable action" in s for s in said)


def test_a_reply_the_output_limit_cut_runs_nothing_and_the_run_goes_on(
    settings: Settings,
) -> None:
    cut_plan = Completion(plan_reply("Never"), finish_reason="length")
    cut_actions = Completion(
        "<write_code><path>cut.txt</path><content>x</content></write_code>\nNow I will",
        finish_reason="length",
    )
    llm = ScriptedLLM(
        [
            ("planning", cut_plan),
            ("planning", plan_reply("Write")),
            ("thinking", cut_actions),
            ("thinking", finish("stopped short")),
        ]
    )
    messages, end = post(settings, llm)
    assert end["status"] == "completed"
    tasks = [m for m in messages if m["meta"]["action_type"] == "task"]
    assert tasks and all("Never" not in t["content"] for t in tasks)  # the cut plan is unused
    assert "cut off (it hit the output length limit)" in llm.calls[1].messages[-1]["content"]
    told = llm.calls[3].messages[-1]
    assert told["role"] == "user" and told["content"].startswith(NOTE_HEAD)
    assert "cut off (it hit the output length limit) after `write_code`" in told["content"]
    assert not any("cut.txt" in (m["meta"].get("filepath") or "") for m in messages)
    assert not list(settings.workspace_dir.rglob("cut.txt"))  # nothing of it ran
