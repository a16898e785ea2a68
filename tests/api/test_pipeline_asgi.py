"""The pipeline through the ASGI app with a ScriptedLLM."""

from __future__ import annotations

from typing import Any

from starlette.testclient import TestClient

from backend.app import create_app
from backend.config import Settings
from backend.llm.testing import ScriptedLLM
from tests.agent.scripts import finish, plan_reply, run, write
from tests.sse_client import collect
from tests.support.asgi import client_for, kinds, post_run

SCRIPT = 'import pathlib\nout = "a < b & \\"q\\"\\n"\npathlib.Path("out.txt").write_text(out)\n'


def test_script_goal_runs_end_to_end_in_two_model_calls(settings: Settings) -> None:
    llm = ScriptedLLM(
        [
            ("planning", plan_reply("Write and run the script", prose="On it.")),
            (
                "thinking",
                write("gen.py", SCRIPT)
                + "\n"
                + run("python3 gen.py && cat out.txt")
                + "\n"
                + finish("Wrote gen.py, ran it; output in out.txt."),
            ),
        ]
    )
    with client_for(settings, llm) as client:
        messages, end, headers = post_run(
            client, {"goal": "Write a python script, run it, save its output"}
        )
        assert llm.errors == []
        assert llm.stages() == ["planning", "thinking"]
        assert end == {
            "conversation_id": headers["x-conversation-id"],
            "run_id": headers["x-run-id"],
            "status": "completed",
        }
        assert kinds(messages) == [
            "question",
            "auto_reply",
            "plan",
            "task",
            "write_code",
            "write_code",
            "terminal_run",
            "terminal_run",
            "finish",
            "task",
            "finish_summery",
        ]
        assert [m["seq"] for m in messages] == list(range(1, len(messages) + 1))
        assert messages[1]["content"] == "On it."
        write_running, write_done = messages[4], messages[5]
        assert write_running["uuid"] == write_done["uuid"]
        assert (write_running["status"], write_done["status"]) == ("running", "success")
        assert write_done["content"] == "File gen.py written successfully."
        assert write_done["meta"]["filepath"] == "gen.py"
        assert "Exit code: 0" in messages[7]["content"]
        assert messages[9]["status"] == "success"
        assert messages[9]["meta"]["json"][0]["status"] == "completed"
        summary = messages[-1]
        files = {f["filepath"]: f for f in summary["meta"]["json"]}
        assert set(files) == {"gen.py", "out.txt"}
        cid = headers["x-conversation-id"]
        got = client.get(files["out.txt"]["url"])
        assert got.status_code == 200
        assert got.content == b'a < b & "q"\n'
        assert got.headers["content-disposition"].startswith("attachment")
        assert client.get(files["gen.py"]["url"]).content == SCRIPT.encode()
        stored = client.get(f"/api/conversations/{cid}/messages").json()
        assert stored == messages
        conv = client.get(f"/api/conversations/{cid}").json()
        assert conv["status"] == "completed"
        assert conv["usage"]["stages"]["planning"]["calls"] == 1
        assert conv["total_tokens"] == 30


def test_chat_goal_is_answered_directly_without_plan(settings: Settings) -> None:
    llm = ScriptedLLM([("auto_reply", "Paris is the capital of France.")])
    with client_for(settings, llm) as client:
        messages, end, _ = post_run(client, {"question": "What is the capital of France?"})
    assert llm.errors == []
    assert kinds(messages) == ["question", "auto_reply"]
    assert messages[0]["role"] == "user"
    assert messages[1]["content"] == "Paris is the capital of France."
    assert end is not None and end["status"] == "completed"


def test_unmatched_goal_asks_the_route_stage(settings: Settings) -> None:
    llm = ScriptedLLM(
        [
            ("route", '{"task_type": "general_chat", "needs_tools": false}'),
            ("auto_reply", "42."),
        ]
    )
    with client_for(settings, llm) as client:
        messages, _end, _ = post_run(client, {"goal": "Meaning of life?"})
    assert llm.errors == []
    assert kinds(messages) == ["question", "auto_reply"]


def test_bad_route_reply_means_tools(settings: Settings) -> None:
    llm = ScriptedLLM(
        [
            ("route", "I think this is chat."),
            ("planning", plan_reply("Do it")),
            ("thinking", finish("Nothing to do.")),
        ]
    )
    with client_for(settings, llm) as client:
        messages, end, _ = post_run(client, {"goal": "Ponder the void"})
    assert llm.errors == []
    assert end is not None and end["status"] == "completed"
    assert kinds(messages)[-1] == "finish_summery"
    assert messages[-1]["content"] == "Nothing to do."


def test_failing_action_skips_the_rest_and_task_fails_after_max_steps(tmp_path: Any) -> None:
    from tests.support.settings import make_settings

    settings = make_settings(tmp_path, max_steps_per_task=2)
    llm = ScriptedLLM(
        [
            ("planning", plan_reply("Break")),
            ("thinking", run("exit 3") + write("never.txt", "x\n") + finish("no")),
            ("thinking", run("false")),
        ]
    )
    with client_for(settings, llm) as client:
        messages, end, _ = post_run(client, {"goal": "run a failing command", "mode": "agent"})
    assert llm.errors == []
    assert end is not None and end["status"] == "failed"
    skipped = [m for m in messages if "Skipped" in m["content"]]
    assert [m["meta"]["action_type"] for m in skipped] == ["write_code", "finish"]
    assert not list((tmp_path / "workspace").rglob("never.txt"))
    assert kinds(messages)[-3:] == ["task", "error", "finish_summery"]
    assert "MAX_STEPS_PER_TASK" in messages[-2]["content"]
    assert messages[-3]["meta"]["json"][0]["status"] == "failed"


def test_three_unparseable_replies_fail_the_task(settings: Settings) -> None:
    llm = ScriptedLLM(
        [
            ("planning", plan_reply("Try")),
            ("thinking", "I will now write the file."),
            ("thinking", "Sure! Here it is."),
            ("thinking", "Done?"),
        ]
    )
    with client_for(settings, llm) as client:
        messages, end, _ = post_run(client, {"goal": "write code", "mode": "agent"})
    assert llm.errors == []
    assert end is not None and end["status"] == "failed"
    assert "3 replies in a row" in messages[-2]["content"]
    # the malformed text goes back only as the model's own turn, the note as the service's
    last_call = llm.calls[-1].messages
    assert {"role": "assistant", "content": "Sure! Here it is."} in last_call
    assert all(
        "Sure! Here it is." not in str(m["content"]) for m in last_call[1:] if m["role"] == "user"
    )
    assert last_call[-1]["role"] == "user" and "Format error" in last_call[-1]["content"]


def test_plan_retries_with_the_error_fed_back(settings: Settings) -> None:
    llm = ScriptedLLM(
        [
            ("planning", "Let me think about a plan."),
            ("planning", plan_reply("Only task")),
            ("thinking", finish("ok")),
        ]
    )
    with client_for(settings, llm) as client:
        messages, end, _ = post_run(client, {"goal": "write code", "mode": "agent"})
    assert llm.errors == []
    assert end is not None and end["status"] == "completed"
    assert llm.calls[1].messages[-1]["role"] == "user"
    assert "plan" not in kinds(messages)[:1]


def test_two_tasks_use_a_summary_call_and_notes_flow_between_tasks(settings: Settings) -> None:
    llm = ScriptedLLM(
        [
            ("planning", plan_reply("First", "Second")),
            ("thinking", write("a.txt", "A\n") + finish("made a.txt")),
            ("thinking", run("cat a.txt") + finish("read a.txt")),
            ("summary", "Both done."),
        ]
    )
    with client_for(settings, llm) as client:
        messages, _end, _ = post_run(client, {"goal": "two steps please", "mode": "agent"})
    assert llm.errors == []
    first, second = llm.calls[1].messages, llm.calls[2].messages
    assert "made a.txt" in second[-1]["content"]
    # the second task goes on from the first one's prompt: its progress is appended, the
    # plan is never rewritten in place (a provider's cache serves the whole first prompt)
    assert second[: len(first)] == first
    assert second[len(first)]["role"] == "assistant"  # the reply that finished the first
    assert "[completed] First" in second[-1]["content"]
    assert "Current task: Second" in second[-1]["content"]
    assert messages[-1]["content"] == "Both done."
    task_msgs = [m for m in messages if m["meta"]["action_type"] == "task"]
    assert [(m["status"], m["meta"]["json"][0]["status"]) for m in task_msgs] == [
        ("running", "running"),
        ("success", "completed"),
        ("running", "running"),
        ("success", "completed"),
    ]


def test_missing_model_config_ends_with_a_clear_error(tmp_path: Any) -> None:
    from backend.llm.factory import make_llm
    from tests.support.settings import make_settings

    settings = make_settings(tmp_path, llm_model=None)
    app = create_app(settings, llm=make_llm(settings))
    with TestClient(app) as client:
        with client.stream("POST", "/api/agent/run", json={"goal": "write code"}) as resp:
            messages, end = collect(resp.iter_lines())
        assert client.get("/api/health").json()["status"] == "ok"
    assert end is not None and end["status"] == "failed"
    error = next(m for m in messages if m["meta"]["action_type"] == "error")
    assert "LLM_MODEL" in error["content"]


def test_follow_up_goal_sees_the_conversation_so_far(settings: Settings) -> None:
    llm = ScriptedLLM(
        [
            ("auto_reply", "Paris."),
            ("auto_reply", "About 2.1 million."),
        ]
    )
    with client_for(settings, llm) as client:
        _, _, headers = post_run(client, {"goal": "What is the capital of France?"})
        cid = headers["x-conversation-id"]
        messages, end, headers2 = post_run(
            client, {"goal": "What is its population?", "conversation_id": cid, "mode": "chat"}
        )
        assert headers2["x-conversation-id"] == cid
        assert end is not None and end["status"] == "completed"
        assert messages[0]["seq"] == 3
        assert len(client.get("/api/conversations").json()) == 1
    system = llm.calls[1].messages[0]["content"]
    assert "What is the capital of France?" in system and "Paris." in system


def test_unavailable_runtime_is_refused_before_anything_is_created(settings: Settings) -> None:
    llm = ScriptedLLM([])
    # only `local` may be offered: the start-up probe, which runs beside this test, cannot
    # offer `docker` where an engine runs
    app = create_app(settings.model_copy(update={"runtimes": "local"}), llm=llm)
    with TestClient(app) as client:
        r = client.post("/api/agent/run", json={"goal": "write code", "runtime": "docker"})
        assert r.status_code == 400
        assert "docker runtime is not available" in r.json()["error"]["message"]
        assert client.get("/api/conversations").json() == []
    assert llm.calls == []


def test_specialist_model_answers_and_the_default_takes_over_when_it_fails(
    settings: Settings,
) -> None:
    from backend.agent.specialists import Specialist
    from backend.llm.base import LLMError

    table = (Specialist("code_generation", True, "special/coder", ("script",)),)
    llm = ScriptedLLM(
        [
            ("planning", plan_reply("One")),
            ("thinking", LLMError("special/coder is down")),
            ("thinking", finish("done by the default model")),
        ]
    )
    app = create_app(settings, llm=llm, specialists=table)
    with (
        TestClient(app) as client,
        client.stream("POST", "/api/agent/run", json={"goal": "write a script"}) as resp,
    ):
        messages, end = collect(resp.iter_lines())
    assert llm.errors == []
    assert end is not None and end["status"] == "completed"
    assert [c.model for c in llm.calls] == [None, "special/coder", None]
    assert messages[-1]["content"] == "done by the default model"


def test_health_names_the_runtimes_offered_now(tmp_path: Any) -> None:
    from tests.support.settings import make_settings

    # only `local` may be offered: the start-up probe, which runs beside this test, would
    # otherwise add `docker` wherever an engine runs, between an assignment below and its GET
    app = create_app(make_settings(tmp_path, runtimes="local"), llm=ScriptedLLM([]))
    with TestClient(app) as client:
        first = client.get("/api/health")
        assert first.status_code == 200 and first.headers["content-type"] == "application/json"
        assert first.json() == {"status": "ok", "runtimes": app.state.runtimes_available}
        app.state.runtimes_available = ["local", "docker"]  # an engine found later
        assert client.get("/api/health").json() == {"status": "ok", "runtimes": ["local", "docker"]}
        app.state.runtimes_available = ["local"]
        assert client.get("/api/health").json() == {"status": "ok", "runtimes": ["local"]}
