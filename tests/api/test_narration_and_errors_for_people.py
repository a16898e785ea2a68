"""What the user reads: the agent's narration between actions, and errors said once in
user terms (never the corrective text meant for the model)."""

from __future__ import annotations

from typing import Any

from starlette.testclient import TestClient

from backend.actions import FormatError, parse_actions
from backend.app import create_app
from backend.config import Settings
from backend.llm.testing import ScriptedLLM
from tests.agent.scripts import finish, plan_reply, run
from tests.sse_client import collect


def post(settings: Settings, llm: ScriptedLLM, goal: str) -> tuple[list[dict[str, Any]], Any]:
    with (
        TestClient(create_app(settings, llm=llm)) as client,
        client.stream("POST", "/api/agent/run", json={"goal": goal, "mode": "agent"}) as resp,
    ):
        return collect(resp.iter_lines())


def test_narration_is_published_as_the_agents_words_before_the_actions(
    settings: Settings,
) -> None:
    llm = ScriptedLLM(
        [
            ("planning", plan_reply("Count")),
            (
                "thinking",
                "<think>private reasoning</think>\nThe file is missing; I'll list the folder "
                "first.\n" + run("ls") + finish("Listed."),
            ),
        ]
    )
    messages, end = post(settings, llm, "count files")
    assert end is not None and end["status"] == "completed"
    kinds = [(m["meta"]["action_type"], m["type"]) for m in messages]
    i = kinds.index(("thinking", "narration"))
    assert kinds[i - 1] == ("thinking", "")  # the <think> reasoning, kept apart
    assert messages[i - 1]["content"] == "private reasoning"
    assert messages[i]["content"] == "The file is missing; I'll list the folder first."
    assert messages[i]["meta"]["task_id"] == messages[i - 2]["meta"]["task_id"]
    assert kinds[i + 1] == ("terminal_run", "")


def test_a_reply_of_actions_only_has_no_narration(settings: Settings) -> None:
    llm = ScriptedLLM([("planning", plan_reply("Do")), ("thinking", run("true") + finish("ok"))])
    messages, _end = post(settings, llm, "do it")
    assert all(m["type"] != "narration" for m in messages)


def test_format_errors_end_the_run_in_user_terms_said_once(settings: Settings) -> None:
    llm = ScriptedLLM(
        [
            ("planning", plan_reply("Try")),
            ("thinking", "Let me see."),
            ("thinking", "Hmm."),
            ("thinking", "Done?"),
        ]
    )
    messages, end = post(settings, llm, "write code")
    assert end is not None and end["status"] == "failed"
    error, summary = messages[-2], messages[-1]
    assert error["meta"]["action_type"] == "error"
    try:
        parse_actions("Done?")
    except FormatError as exc:
        for_the_model = str(exc)
    assert for_the_model.splitlines()[0] not in error["content"]
    assert "write_code(" not in error["content"]
    assert len(error["content"]) < 400
    assert "3 replies in a row" in error["content"] and "Try again" in error["content"]
    assert error["content"] not in summary["content"]
    assert "write_code(" not in summary["content"]
    assert summary["content"].startswith("The run did not finish.")


def test_an_unusable_plan_ends_the_run_in_user_terms(settings: Settings) -> None:
    llm = ScriptedLLM([("planning", 'Plan: [{"title": "one", ')] * 3)  # JSON cut off
    messages, end = post(settings, llm, "write code")
    assert end is not None and end["status"] == "failed"
    error = messages[-2]
    assert error["content"].startswith("The model produced no plan: none of its 3 replies")
    assert len(error["content"]) < 300
    assert error["content"] not in messages[-1]["content"]
