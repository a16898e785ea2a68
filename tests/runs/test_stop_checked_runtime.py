"""A run's view of its runtime (backend/runs/stop_checked.py) checks the run's stop flag before
every operation of RuntimeOperations and passes everything else through as it is. A new operation
is declared in one place, the protocol in backend/runtime/base.py (and implemented by the
runtime): written here in a temporary module that extends the protocol, it is stop-checked
with nothing else edited."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from backend.agent.control import RunControl, RunStopped
from backend.runs.stop_checked import StopCheckedRuntime
from backend.runtime import base
from backend.runtime.base import RuntimeOperations, operation_names
from backend.runtime.local import LocalRuntime

NEW_OPERATION = '''"""An operation added: the protocol declares it, a runtime implements it."""

from pathlib import Path
from typing import Protocol

from backend.runtime.base import ActionResult, RuntimeOperations
from backend.runtime.local import LocalRuntime


class Operations(RuntimeOperations, Protocol):
    async def list_dir(self, workspace: Path, path: str) -> ActionResult: ...


class ListingRuntime(LocalRuntime):
    async def list_dir(self, workspace: Path, path: str) -> ActionResult:
        names = sorted(p.name for p in (workspace / path).iterdir())
        return ActionResult("success", "\\n".join(names))
'''


def load(tmp_path: Path, name: str, text: str) -> ModuleType:
    path = tmp_path / f"{name}.py"
    path.write_text(text, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_the_operations_are_the_protocols() -> None:
    # the ones the builtin actions call; a new one is the protocol's too (below)
    assert {"write_file", "edit_file", "read_file", "run_command"} <= operation_names()


async def test_every_operation_checks_the_stop_flag_first(tmp_path: Path) -> None:
    control = RunControl("r1")
    runtime = StopCheckedRuntime(LocalRuntime(), control)
    workspace = tmp_path / "ws"
    done = await runtime.write_file(workspace, "a.txt", "hello")
    assert done.ok and (workspace / "a.txt").read_text() == "hello"
    control.stop_requested = True
    calls: dict[str, tuple[Any, ...]] = {
        "write_file": (workspace, "b.txt", "x"),
        "edit_file": (workspace, "a.txt", "hello", "bye"),
        "read_file": (workspace, "a.txt"),
        "run_command": (workspace, "touch ran"),
    }
    missing = operation_names() - set(calls)
    assert not missing, f"give the arguments of {sorted(missing)} in `calls` here"
    for name, args in calls.items():
        with pytest.raises(RunStopped):
            await getattr(runtime, name)(*args)
    assert sorted(p.name for p in workspace.iterdir()) == ["a.txt"]  # nothing ran
    assert (workspace / "a.txt").read_text() == "hello"


async def test_the_rest_is_the_inner_runtimes_as_it_is(tmp_path: Path) -> None:
    control = RunControl("r1", stop_requested=True)
    inner = LocalRuntime()
    runtime = StopCheckedRuntime(inner, control)
    assert runtime.name == "local" and runtime.prompt_note == inner.prompt_note
    assert await runtime.available()  # the life cycle is never stop-checked
    await runtime.forget(tmp_path)
    assert await runtime.reap_owners(["gone"]) == 0
    await runtime.close()
    with pytest.raises(AttributeError):
        runtime.no_such_thing  # noqa: B018


async def test_a_new_operation_is_declared_once_and_checked_with_nothing_else_edited(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = operation_names()
    added = load(tmp_path, "listing_operation", NEW_OPERATION)
    assert RuntimeOperations in added.Operations.__mro__
    monkeypatch.setattr(base, "RuntimeOperations", added.Operations)  # as if edited there
    assert "list_dir" in operation_names() and "list_dir" not in before
    control = RunControl("r1")
    runtime = StopCheckedRuntime(added.ListingRuntime(), control)
    workspace = tmp_path / "ws"
    (workspace / "src").mkdir(parents=True)
    (workspace / "src" / "app.py").write_text("")
    listed = await runtime.list_dir(workspace, "src")
    assert (listed.status, listed.content) == ("success", "app.py")
    control.stop_requested = True
    with pytest.raises(RunStopped):
        await runtime.list_dir(workspace, "src")
    sys.modules.pop("listing_operation", None)
