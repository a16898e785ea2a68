"""The run's view of its runtime: every action first checks the run's stop flag."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from backend.runtime.base import ActionResult, OutputCallback, Runtime

if TYPE_CHECKING:
    from backend.agent.control import RunControl


class StopCheckedRuntime:
    """Wraps the shared runtime for one run: every operation raises RunStopped when a stop was
    requested, before the action starts (the pipeline closes the action's message)."""

    def __init__(self, inner: Runtime, control: RunControl) -> None:
        self.inner = inner
        self.control = control
        self.name = inner.name
        self.prompt_note = inner.prompt_note

    async def write_file(self, workspace: Path, path: str, content: str) -> ActionResult:
        self.control.check_stop()
        return await self.inner.write_file(workspace, path, content)

    async def edit_file(
        self, workspace: Path, path: str, old_str: str, new_str: str
    ) -> ActionResult:
        self.control.check_stop()
        return await self.inner.edit_file(workspace, path, old_str, new_str)

    async def read_file(self, workspace: Path, path: str) -> ActionResult:
        self.control.check_stop()
        return await self.inner.read_file(workspace, path)

    async def run_command(
        self,
        workspace: Path,
        command: str,
        cwd: str | None = None,
        on_output: OutputCallback | None = None,
    ) -> ActionResult:
        self.control.check_stop()
        return await self.inner.run_command(workspace, command, cwd, on_output)

    async def start(self) -> None:
        await self.inner.start()

    async def available(self) -> bool:
        return await self.inner.available()

    async def forget(self, workspace: Path) -> None:
        await self.inner.forget(workspace)

    async def close(self) -> None:
        await self.inner.close()

    async def reap_owners(self, owners: Iterable[str]) -> int:
        return await self.inner.reap_owners(owners)
