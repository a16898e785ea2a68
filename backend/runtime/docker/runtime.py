"""DockerRuntime: commands run in one locked-down container per conversation workspace.

File actions stay host-side in :class:`BaseRuntime` (the workspace is bind-mounted at
``/workspace``), so confinement, caps and results are the same as the local runtime's; only
``terminal_run`` goes into the container, through the sandbox's command runner
(:mod:`.runner`) or, for images without python3, one exec per command (:mod:`.execs`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from backend.runtime.base import (
    CommandOutput,
    OutputCallback,
    PromptNote,
    RuntimeUnavailable,
)
from backend.runtime.docker.engine import API_ERRORS, ContainerGone, Engine, short
from backend.runtime.docker.execs import run_with_exec, sweep
from backend.runtime.docker.runner import RunnerGone, run_with_runner, runner_for
from backend.runtime.docker.sandboxes import Sandboxes
from backend.runtime.docker.services import ExecProcess, spawn_docker
from backend.runtime.docker.tasks import shielded
from backend.runtime.limits.budget import BudgetedRuntime

if TYPE_CHECKING:
    from backend.config import Settings

log = logging.getLogger(__name__)


class DockerRuntime(BudgetedRuntime):
    name = "docker"
    prompt_note = PromptNote(
        planning="in a Docker sandbox", thinking="a Docker sandbox; the folder is /workspace"
    )
    always_available = False  # offered once an engine answers and the image exists
    unavailable_note = (
        "no Docker engine answers, or the sandbox image is missing: see docs/docker.md"
    )

    @classmethod
    def from_settings(cls, settings: Settings, *, owner: str | None = None) -> DockerRuntime:
        return cls(settings, owner=owner)

    def __init__(
        self,
        settings: Settings,
        *,
        base_url: str | None = None,
        runner: bool = True,
        owner: str | None = None,
    ) -> None:
        """``runner=False``: one ``docker exec`` per command instead of the sandbox's
        long-lived command runner (slower; what images without python3 get anyway).

        ``owner``: the instance id of the process (default: a fresh uuid hex). Sandboxes are
        labelled ``planact.owner=<owner>``; a runtime removes only its own, and those of the
        owners :meth:`reap_owners` is given.
        """
        super().__init__(
            terminal_timeout=settings.terminal_timeout,
            workspace_max_mb=settings.workspace_max_mb,
        )
        self.owner = owner or uuid.uuid4().hex
        self.use_runner = runner
        self.settings = settings
        self.engine = Engine(base_url)
        self.sandboxes = Sandboxes(settings, self.engine, self.owner)

    # ---- lifecycle -------------------------------------------------------------------

    async def start(self) -> None:
        """Start the idle reaper; remove sandboxes left under this owner id (a restart that
        kept its id) or without an owner label (an older version). Other owners' sandboxes
        are left alone: :meth:`reap_owners` removes those of owners known to be dead."""
        try:
            removed = await self.sandboxes.reap_orphans()
        except RuntimeUnavailable as exc:
            log.warning("docker runtime: %s", exc)
            return
        except API_ERRORS as exc:
            log.warning("docker runtime: could not reap orphaned sandboxes: %s", exc)
            return
        if removed:
            log.info("docker runtime: removed %d orphaned sandbox container(s)", removed)

    async def available(self) -> bool:
        """Whether an engine answers and the sandbox image exists (the server's probe)."""
        image = self.settings.sandbox_image
        try:
            client = await self.engine.client()
            await anyio.to_thread.run_sync(client.images.get, image)
        except RuntimeUnavailable as exc:
            log.info("docker runtime unavailable: %s", exc)
            return False
        except API_ERRORS as exc:
            log.info("docker runtime unavailable: image %s: %s", image, short(exc))
            return False
        return True

    async def forget(self, workspace: Path) -> None:
        await self.sandboxes.forget(os.path.realpath(workspace))

    async def reap_owners(self, owners: Iterable[str]) -> int:
        """Remove the sandboxes of the given owners (dead processes: their lease expired).

        Our own owner id is never reaped. Returns how many containers were removed.
        """
        removed = await self.sandboxes.reap_owners(owners)
        if removed:
            log.info("docker runtime: removed %d sandbox(es) of dead owners", removed)
        return removed

    async def close(self) -> None:
        """Remove every sandbox this runtime started, those being created included.

        The runtime starts no sandbox afterwards (a command gets a failure result).
        """
        await self.sandboxes.close()

    # ---- services (a preview's app): backend/runtime/docker/services.py ------------------

    def service_socket_root(self, workspace: Path) -> Path:
        """Where a service's forwarder sockets go: a folder the container sees."""
        return Path(os.path.realpath(workspace)) / ".preview"

    async def start_service(
        self, workspace: Path, command: str, port: int, socket_dir: Path
    ) -> ExecProcess:
        return await spawn_docker(self.engine, self.sandboxes, workspace, command, port, socket_dir)

    # ---- BaseRuntime hooks -----------------------------------------------------------

    async def _prepare(self, workspace: Path) -> None:
        await self.sandboxes.claim(os.path.realpath(workspace))

    def _file_owner(self, workspace: Path) -> tuple[int, int] | None:
        if os.geteuid() != 0:
            return None  # only root can give files away; ours are ours
        return self.sandboxes.file_owner(os.path.realpath(workspace))

    async def _run_in_sandbox(
        self,
        command: str,
        workspace: Path,
        cwd: str,
        on_output: OutputCallback | None = None,
    ) -> CommandOutput:
        key = os.path.realpath(workspace)
        limit = self.terminal_timeout
        for attempt in (1, 2):
            sandbox = await self.sandboxes.acquire(key)
            # the runner kills every leftover of the sandbox user itself; without it (or
            # when it died) an exec does, once no other command runs in the sandbox
            clean_up = True
            try:
                try:
                    runner = await runner_for(self.sandboxes, sandbox) if self.use_runner else None
                    if runner is not None:
                        with contextlib.suppress(RunnerGone):  # hung up: use an exec
                            result = await run_with_runner(
                                self.sandboxes, sandbox, runner, command, cwd, limit, on_output
                            )
                            clean_up = not runner.alive
                            return result
                    return await run_with_exec(
                        self.sandboxes, sandbox, command, cwd, limit, on_output
                    )
                except ContainerGone:
                    # died while idle (killed from outside, engine restart) or its runner
                    # cannot start any more: start a fresh one
                    clean_up = False
                    await self.sandboxes.drop(sandbox)
                    if attempt == 2:
                        raise RuntimeUnavailable("the sandbox container stops at once") from None
                    continue
            finally:
                if clean_up and sandbox.busy == 1 and self.sandboxes.by_key.get(key) is sandbox:
                    await shielded(sweep(self.sandboxes, sandbox))
                sandbox.busy -= 1
                sandbox.last_used = time.monotonic()
        raise AssertionError("unreachable")
