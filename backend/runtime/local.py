"""LocalRuntime: commands run as child processes of the server, in a bubblewrap sandbox
when one is given (:mod:`backend.runtime.bwrap`; ``LOCAL_SANDBOX``, decided at start by
:mod:`backend.runtime.sandboxing`), otherwise as the server's user: not a sandbox.

Each command runs under :mod:`backend.runtime.reaper`, a small wrapper that is a child
subreaper: when the command ends, times out or is stopped, the wrapper kills every process
the command started (``setsid`` and double forks included) before it exits. The wrapper
also stops the command when the server dies. Sandboxed, the wrapper stays outside and runs
``bwrap … -- bash -c COMMAND``: the sandbox's PID namespace dies with bwrap, which dies
with the wrapper. Waiting is cancellation-safe: a cancelled ``_run_command`` stops the
wrapper, waits for it (shielded, bounded) and re-raises.

Limits (:mod:`backend.runtime.limits`): every command runs under the workspace watcher and
with no file past ``WORKSPACE_MAX_MB``; a sandboxed one also in its conversation's control
groups (moved there by the server while the wrapper starts) or, without them, under
``RLIMIT_DATA`` and ``nice``, with a ``/tmp`` of ``SANDBOX_TMP_MB``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from pathlib import Path

import anyio

from backend.runtime import reaper
from backend.runtime.base import CommandOutput, OutputCallback, hand_output
from backend.runtime.bwrap import Bubblewrap
from backend.runtime.headtail import HeadTail
from backend.runtime.limits import SandboxLimits
from backend.runtime.limits.budget import BudgetedRuntime
from backend.runtime.limits.cgroups import Cgroups
from backend.runtime.services import SOCKET_DIR_INSIDE, service_script

log = logging.getLogger(__name__)
NICE = 10  # without control groups: the sandbox yields the CPU to the server
STOP_GRACE = 5.0  # seconds the wrapper gets to kill its tree before it is killed itself
REAPER = os.path.abspath(reaper.__file__)


class LocalRuntime(BudgetedRuntime):
    name = "local"
    reaper = REAPER  # the wrapper script each command runs under

    def __init__(
        self,
        terminal_timeout: float = 120.0,
        workspace_max_mb: float = 1024,
        *,
        sandbox: Bubblewrap | None = None,
        offered: bool = True,
        limits: SandboxLimits | None = None,
        cgroups: Cgroups | None = None,
    ) -> None:
        super().__init__(terminal_timeout, workspace_max_mb)
        self.sandbox = sandbox  # None: commands run unsandboxed, as the server's user
        self.offered = offered  # False: a shared server without a sandbox (sandboxing.py)
        # the sandbox's memory, process and CPU caps: in a control group per conversation
        # (cgroups), else rlimits per process; none unsandboxed (docs/security.md)
        self.limits = limits if sandbox is not None else None
        self.cgroups = cgroups if self.limits is not None else None

    def _limit_args(self, workspace: Path) -> list[str]:
        """The reaper's LIMIT options for a command in ``workspace``."""
        args = ["--rlimit", f"RLIMIT_FSIZE={self.workspace_max_bytes}"]
        if self.cgroups is not None:
            args.insert(0, "--wait-for-group")  # the server moves it in: _join_groups
        elif self.limits is not None:
            args += ["--rlimit", f"RLIMIT_DATA={self.limits.memory}", "--nice", str(NICE)]
        return args

    async def forget(self, workspace: Path) -> None:
        if self.cgroups is not None:
            self.cgroups.forget(workspace)

    async def close(self) -> None:
        if self.cgroups is not None:
            self.cgroups.close()

    async def start_service(
        self, workspace: Path, command: str, port: int, socket_dir: Path
    ) -> asyncio.subprocess.Process:
        """Start ``command`` as a service of ``workspace``'s sandbox (a preview's app,
        :mod:`backend.runtime.services`): the same reaper, bubblewrap rules and limits as a
        command, one more bind (the forwarder's sockets); its stdout and stderr are pipes."""
        env, wrapper, workdir = self._surroundings(workspace, ".")
        if self.sandbox is not None:
            # one more bind before `--`: the folder of the forwarder's sockets
            wrapper = [*wrapper[:-1], "--bind", str(socket_dir), SOCKET_DIR_INSIDE, "--"]
            script = service_script(command, port, SOCKET_DIR_INSIDE)
        else:
            script = service_script(command, port, str(socket_dir), sys.executable)
        env["PYTHONUNBUFFERED"] = "1"
        proc = await self._start_reaped(script, workspace, env, wrapper, workdir)
        try:
            await _join_groups(self.cgroups, proc, workspace)
        except BaseException:
            await _stop(proc)
            raise
        return proc

    def _surroundings(self, workspace: Path, cwd: str) -> tuple[dict[str, str], list[str], Path]:
        """(environment, wrapper argv, working folder) of a process of ``workspace``'s
        sandbox: bubblewrap's, or the server's own environment without its secrets."""
        if self.sandbox is not None:
            return self.sandbox.env(cwd), self.sandbox.argv(workspace, cwd), workspace
        env = {**os.environ, "HOME": str(workspace), "PWD": str(workspace / cwd)}
        for secret in ("LLM_API_KEY", "AUTH_TOKEN", "AUTH_TOKENS"):
            env.pop(secret, None)
        return env, [], workspace / cwd

    async def _start_reaped(
        self,
        script: str,
        workspace: Path,
        env: dict[str, str],
        wrapper: list[str],
        workdir: Path,
    ) -> asyncio.subprocess.Process:
        """``script`` under the reaper (a new session), with the limits of ``workspace``'s
        sandbox; with control groups it waits for :func:`_join_groups`.

        A cancellation while the process starts does not cut the start short (asyncio would
        SIGKILL the reaper alone, leaving what it started running and holding the pipes):
        the start completes, then the reaper is told to end its whole tree (:func:`_stop`),
        then the cancellation goes on."""
        spawn = asyncio.ensure_future(
            asyncio.create_subprocess_exec(
                sys.executable,
                "-I",
                "-S",
                self.reaper,
                str(os.getpid()),
                script,
                *self._limit_args(workspace),
                *wrapper,
                cwd=workdir,
                env=env,
                stdin=asyncio.subprocess.PIPE if self.cgroups else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
            )
        )
        try:
            return await asyncio.shield(spawn)
        except asyncio.CancelledError:
            cleanup = asyncio.ensure_future(_stop_spawned(spawn))
            try:
                await asyncio.shield(cleanup)
            except BaseException:
                cleanup.add_done_callback(_retrieve)
            raise

    async def _run_in_sandbox(
        self,
        command: str,
        workspace: Path,
        cwd: str,
        on_output: OutputCallback | None = None,
    ) -> CommandOutput:
        env, wrapper, workdir = self._surroundings(workspace, cwd)
        ooms = self.cgroups.oom_kills(workspace) if self.cgroups is not None else 0
        proc = await self._start_reaped(command, workspace, env, wrapper, workdir)
        out, err = HeadTail(), HeadTail()
        pumps = [
            asyncio.create_task(_pump(proc.stdout, out, "stdout", on_output)),
            asyncio.create_task(_pump(proc.stderr, err, "stderr", on_output)),
        ]
        timed_out = False
        try:
            try:
                async with asyncio.timeout(self.terminal_timeout):
                    await _join_groups(self.cgroups, proc, workspace)
                    await proc.wait()
            except TimeoutError:
                timed_out = True
                await _stop(proc)
            await _drain(pumps)
        except BaseException:
            # cancelled (the run was stopped): the whole tree dies before we re-raise, even
            # when a second cancellation arrives meanwhile
            cleanup = asyncio.ensure_future(_stop_and_drain(proc, pumps))
            try:
                await asyncio.shield(cleanup)
            except BaseException:
                cleanup.add_done_callback(_retrieve)
            raise
        code = proc.returncode
        if code is not None and code < 0:
            code = 128 - code  # the wrapper itself was killed
        note = ""
        if self.cgroups is not None and self.cgroups.oom_kills(workspace) > ooms:
            assert self.limits is not None
            note = (
                f"Killed: out of memory (the conversation's cap is {self.limits.memory_words}, "
                "SANDBOX_MEMORY_MB; a full /tmp counts too)."
            )
        return CommandOutput(
            exit_code=None if timed_out else code,
            stdout=out.value(),
            stderr=err.value(),
            note=note,
            timed_out=timed_out,
            stdout_dropped=out.dropped,
            stderr_dropped=err.dropped,
        )


async def _join_groups(
    cgroups: Cgroups | None, proc: asyncio.subprocess.Process, workspace: Path
) -> None:
    """Move the starting wrapper into the conversation's control groups, then tell it to
    go on ("1") or to fail ("0"): it waits for that byte before it starts anything."""
    if cgroups is None or proc.stdin is None:
        return
    try:
        await anyio.to_thread.run_sync(cgroups.join, workspace, proc.pid)
        go = b"1"
    except OSError as exc:
        log.warning("a command could not be put in its control groups: %s", exc)
        go = b"0"
    proc.stdin.write(go)
    with contextlib.suppress(ConnectionError):
        await proc.stdin.drain()
    proc.stdin.close()


async def _pump(
    stream: asyncio.StreamReader | None,
    sink: HeadTail,
    name: str = "stdout",
    on_output: OutputCallback | None = None,
) -> None:
    assert stream is not None
    while chunk := await stream.read(65536):
        sink.feed(chunk)
        hand_output(on_output, name, chunk)


async def _stop(proc: asyncio.subprocess.Process) -> None:
    """Tell the wrapper to kill its tree and wait for it; kill it if it does not obey."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
    try:
        async with asyncio.timeout(STOP_GRACE):
            await proc.wait()
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()


async def _drain(pumps: list[asyncio.Task[None]]) -> None:
    """Wait for the output pumps (the pipes close when the last process is gone)."""
    _done, pending = await asyncio.wait(pumps, timeout=STOP_GRACE)
    for task in pending:
        task.cancel()
    results = await asyncio.gather(*pumps, return_exceptions=True)
    for result in results:
        if isinstance(result, Exception):
            raise result


async def _stop_and_drain(
    proc: asyncio.subprocess.Process, pumps: list[asyncio.Task[None]]
) -> None:
    try:
        await _stop(proc)
    finally:
        for task in pumps:
            task.cancel()
        await asyncio.gather(*pumps, return_exceptions=True)


async def _stop_spawned(spawn: asyncio.Future[asyncio.subprocess.Process]) -> None:
    """Once ``spawn`` has started its process (if it did), end it and its whole tree and
    read its pipes to their end."""
    try:
        proc = await spawn
    except Exception:
        return  # it did not start: nothing runs
    await _stop(proc)
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(STOP_GRACE):
                    await stream.read()


def _retrieve(task: asyncio.Future[None]) -> None:
    if not task.cancelled():
        task.exception()
