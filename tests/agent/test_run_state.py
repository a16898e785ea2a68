"""RunState is plain data: it goes through JSON and comes back equal, progress included."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from backend.actions.model import Action
from backend.agent.budget import Budget
from backend.agent.outcomes import Stage
from backend.agent.specialists import Specialist
from backend.agent.state import RunState
from backend.agent.transcript import Outcome, Turn, pending_turn, stored_turn, turn_from
from backend.messages.message import Message
from backend.messages.tasks import PlanTask


def a_run_in_progress(tmp_path: Path) -> RunState:
    running = Message.build("terminal_run", "ls -la", status="running", task_id="t2")
    running.seq, running.conversation_id, running.run_id = 7, "c1", "r1"
    return RunState(
        run_id="r1",
        conversation_id="c1",
        user_id="1",
        goal="Write a script that counts words",
        mode="agent",
        runtime="docker",
        workspace=tmp_path / "ws",
        model="openai/picked",
        inputs=["upload/words.txt"],
        history=[{"goal": "earlier", "answer": "done"}],
        specialist=Specialist("code_generation", True, "openrouter/coder", ("script", "code")),
        tasks=[
            PlanTask(id="t1", title="Write it", description="", requirement="", status="completed"),
            PlanTask(id="t2", title="Run it", description="", requirement="", status="running"),
        ],
        task_index=1,
        notes=["wrote count.py"],
        snapshot={"upload/words.txt": (12, 1_700_000_000_000)},
        written={"count.py"},
        open_actions={running.uuid: running},
        open_tasks={"t2"},
        budget=Budget(seconds=12.5, calls=3, tokens=4567, cost=0.0123, cost_unknown=True),
    )


def test_a_run_in_progress_round_trips_through_json(tmp_path: Path) -> None:
    state = a_run_in_progress(tmp_path)
    text = state.to_json()
    assert isinstance(json.loads(text), dict)  # plain JSON, nothing pickled
    assert "snapshot" not in json.loads(text)  # the files at start: stored once, beside it
    back = RunState.from_json(text, state.snapshot_json())
    assert back == state
    assert back.specialist == Specialist(
        "code_generation", True, "openrouter/coder", ("script", "code")
    )
    assert back.snapshot["upload/words.txt"] == (12, 1_700_000_000_000)
    assert back.written == {"count.py"} and back.open_tasks == {"t2"}
    assert isinstance(back.budget, Budget) and back.budget.tokens == 4567
    (uid,) = back.open_actions
    assert back.open_actions[uid].status == "running" and back.open_actions[uid].seq == 7


def test_a_fresh_run_round_trips_with_its_defaults(tmp_path: Path) -> None:
    state = RunState(
        run_id="r",
        conversation_id="c",
        user_id="1",
        goal="hi",
        mode="auto",
        runtime="local",
        workspace=tmp_path,
    )
    back = RunState.from_json(state.to_json(), state.snapshot_json())
    assert back == state
    assert back.tasks == [] and back.task_index == 0 and back.specialist is None


BEFORE_TYPING = Path(__file__).parent / "data" / "checkpoints_before_typing.json"


def test_a_checkpoint_stored_before_its_parts_were_typed_reads_typed_and_writes_back_the_same() -> (
    None
):
    """Its wait, tasks, pending turn and model reply were plain dicts then: they read back
    as their models, and the state writes the very JSON it was read from (a process of
    either version reads what the other stored)."""
    stored = json.loads(BEFORE_TYPING.read_text())
    parked = stored["parked"]
    state = RunState.from_json(parked["checkpoint"], turns=parked["transcript"])
    assert state.wait is not None
    assert (state.wait.uuid, state.wait.kind, state.wait.index) == (
        stored["ids"]["wait_uuid"],
        "approval",
        0,
    )
    (task,) = state.tasks
    assert isinstance(task, PlanTask)
    assert (task.id, task.title, task.status) == (stored["ids"]["task_id"], "One", "running")
    assert state.pending is not None and state.pending.after_seq == state.last_seq == 5
    (action,) = state.pending.actions
    assert (action.type, action.params) == ("terminal_run", {"command": "echo ran >> log.txt"})
    assert json.loads(state.to_json()) == json.loads(parked["checkpoint"])
    assert json.loads(state.turns_json()) == json.loads(parked["transcript"])

    replied = RunState.from_json(stored["with_reply"])
    assert replied.reply is not None and replied.reply_stage == "thinking"
    assert replied.reply.text.startswith("<think>check first</think><terminal_run>")
    assert json.loads(replied.to_json()) == json.loads(stored["with_reply"])


def test_a_turn_is_stored_in_the_shape_it_always_had(tmp_path: Path) -> None:
    """The turn under way and the task's finished turns: the JSON the code before typing
    wrote and read (outcomes as [label, verdict, content]), both ways."""
    turn = Turn(
        reply="<terminal_run><command>ls</command></terminal_run>",
        actions=[Action("terminal_run", {"command": "ls"}, ["a warning"])],
        outcomes=[Outcome("terminal_run: ls", "ok", "a.txt")],
        footer="All actions ran.",
    )
    before = {
        "reply": "<terminal_run><command>ls</command></terminal_run>",
        "actions": [
            {"type": "terminal_run", "params": {"command": "ls"}, "warnings": ["a warning"]}
        ],
        "outcomes": [["terminal_run: ls", "ok", "a.txt"]],
        "footer": "All actions ran.",
        "format_error": "",
        "brief_error": "",
    }
    state = a_run_in_progress(tmp_path)
    state.task_head, state.turns = [], [stored_turn(turn)]
    state.pending = pending_turn(turn, 7)
    assert json.loads(state.to_json())["pending"] == {**before, "after_seq": 7}
    assert json.loads(state.turns_json()) == [before]
    old = json.loads(state.to_json())
    old["pending"] = {**before, "after_seq": 7}
    back = RunState.from_json(json.dumps(old), turns=json.dumps([before]))
    assert back.pending == state.pending and back.turns == state.turns
    assert turn_from(back.turns[0]) == turn and turn_from(back.pending).outcomes == turn.outcomes


def test_a_checkpoints_stage_is_one_of_the_pipelines_and_nothing_else() -> None:
    base = RunState(
        run_id="r", conversation_id="c", user_id="1", goal="g", mode="agent", runtime="local",
        workspace=Path("/tmp/ws"),
    )  # fmt: skip
    assert base.stage is Stage.START
    saved = base.model_copy(update={"stage": Stage.TASKS}).to_json()
    assert '"stage":"tasks"' in saved  # the checkpoint's spelling is the string it was
    assert RunState.from_json(saved).stage is Stage.TASKS
    with pytest.raises(ValidationError, match="stage"):
        RunState.from_json(saved.replace('"stage":"tasks"', '"stage":"warp"'))
