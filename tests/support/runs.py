"""Run managers as processes would make them, over one store: started, closed, killed and buried."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from backend.agent.specialists import BUILTIN
from backend.llm.base import Completion, DeltaCallback
from backend.messages.bus import Bus
from backend.runs import RunManager
from backend.store.repo import Store
from backend.store.rows import RunToExecute
from tests.agent.scripts import finish, plan_reply, run, write
from tests.support.settings import make_settings


async def close(m: RunManager) -> None:
    await m.shutdown()
    await m.store.close()


COMMAND = "echo ran >> log.txt"


class ReactiveLLM:
    """The model as a person would script it: plans two tasks; in task One it runs the
    command and writes a file, then finishes once it has read any result; task Two
    finishes at once. Records every call."""

    default_model = "scripted/model"

    def __init__(self, command: str = COMMAND) -> None:
        self.command = command
        self.calls: list[tuple[str, list[dict[str, Any]]]] = []

    async def complete(
        self,
        *,
        stage: str,
        messages: list[dict[str, Any]],
        model: str | None = None,
        on_delta: DeltaCallback | None = None,
    ) -> Completion:
        self.calls.append((stage, [dict(m) for m in messages]))
        if stage == "planning":
            reply = plan_reply("One", "Two")
        elif stage == "thinking" and "Current task: Two" in messages[-1]["content"]:
            reply = finish("two done")
        elif stage == "thinking" and len(messages) == 2:
            reply = "<think>first things first</think>" + run(self.command) + write("a.txt", "a\n")
        elif stage == "thinking":
            reply = finish("one done")
        elif stage == "summary":
            reply = "Both done."
        else:
            raise AssertionError(f"unexpected stage {stage}")
        return Completion(reply, model=self.default_model, prompt_tokens=10, completion_tokens=5)

    async def aclose(self) -> None: ...


# a safety net, never a wait: each wait is for its event (the run's end, the task's end);
# 30 s ran out on a loaded machine
DEADLINE = 120


async def a_process(tmp_path: Path, db_url: str, llm: ReactiveLLM, **settings_: Any) -> RunManager:
    """A process's run manager over the store at ``db_url``; ``settings_``: more settings."""
    settings = make_settings(tmp_path, database_url=db_url, lease_seconds=30.0, **settings_)
    store = Store(db_url)
    store.migrate()
    manager = RunManager(settings, store, Bus(), llm, BUILTIN)
    await manager.open()
    return manager


async def _gone(*args: object, **kwargs: object) -> Any:
    raise ConnectionError("this process was killed")


def kill(manager: RunManager, run_id: str) -> None:
    """kill -9, as far as the store can tell: from now on nothing of this process reaches
    the store (a write already under way completes, or not, as it would)."""
    store = manager.store
    # every way into the database: the thread's (ORM and Core) and the quick path's
    store._core = store._run = store._quick = store._quick_orm = _gone  # type: ignore[method-assign]
    control = record.control if (record := manager.runs.get(run_id)) is not None else None
    if control is not None:
        control.lost = True


async def bury(manager: RunManager, db_url: str) -> None:
    """Its lease is renewed no more and ends (another process sees the PID is gone)."""
    manager.lease._stopped.set()
    for task in manager.lease._tasks:
        task.cancel()
    other = Store(db_url)
    try:
        await other.expire_instance(manager.instance_id)
    finally:
        await other.close()


async def executable(store: Store, run_id: str) -> RunToExecute:
    """The run as a process executing it reads it (it must be there)."""
    run = await store.run_for_execution(run_id)
    assert run is not None, run_id
    return run
