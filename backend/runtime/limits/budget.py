"""The workspace budget (``WORKSPACE_MAX_MB``) held while a command runs, in every runtime.

:func:`run_within` runs a command next to a watcher that samples the workspace's size (the
apparent size of its regular files, :func:`backend.runtime.confined.usage`, sparse files at
full size) every :data:`INTERVAL` seconds, or less often when a sample is costly (a sample
may take at most 1/:data:`COST_SHARE` of the time: a workspace of many files is sampled less
often rather than loading the server). When the workspace grows past the budget, the command
is cancelled, which kills it with its whole process group (the runtimes' contract), and its
result says it was stopped for crossing the limit. So is a command in which a process died
at the file size limit (bash says so on stderr while it runs): its result is a failure
that says a file reached the limit, even when the shell went on and exited 0.

Sampling catches many files, and a fast writer between two samples may overshoot by what it
writes in one interval; a single file cannot grow past the budget at all (the sandboxes set
``RLIMIT_FSIZE`` to it). Filesystem quotas would be exact but need a filesystem and mount
options per deployment (project quotas on ext4/xfs) and a size-capped mount is no home for a
persistent workspace.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import signal
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio

from backend.runtime import confined
from backend.runtime.base import BaseRuntime, CommandOutput, OutputCallback, hand_output
from backend.runtime.headtail import HeadTail

INTERVAL = 0.1  # seconds between two samples of the workspace's size...
COST_SHARE = 10  # ...at least ten times what the last sample took
MB = 1024 * 1024

Measure = Callable[[Path], int]


async def watch(workspace: Path, limit: int, measure: Measure = confined.usage) -> int:
    """Return the workspace's size once it grows past ``limit`` bytes (runs until
    cancelled). A workspace already over it when the command starts (the first sample,
    taken while the command starts) may shrink or stay, not grow: deleting files must work.
    """
    first = True
    while True:
        started = time.perf_counter()
        if not first:
            await asyncio.sleep(INTERVAL)
        began = time.perf_counter()
        try:
            used = await anyio.to_thread.run_sync(measure, workspace)
        except OSError:
            used = 0  # the workspace is being changed under us: the next sample sees it
        if first:
            limit, first = max(limit, used), False
        elif used > limit:
            return used
        cost = time.perf_counter() - began
        spare = cost * COST_SHARE - (time.perf_counter() - started)
        if spare > 0:
            await asyncio.sleep(spare)


def stopped_words(used: int, limit: int) -> str:
    return (
        f"Stopped: the workspace grew to {used / MB:.1f} MB while the command ran, past its "
        f"limit of {limit / MB:g} MB (WORKSPACE_MAX_MB), so the command was killed with all "
        "its processes. Delete files that are not needed (build outputs, downloads, caches) "
        "or write less."
    )


def file_limit_words(limit: int) -> str:
    return (
        f"Stopped: a file reached the workspace limit of {limit / MB:g} MB (WORKSPACE_MAX_MB): "
        "no file may grow past it, so the process writing it was stopped (File too large) "
        "and the command failed. Write less, or delete files that are not needed."
    )


# what bash says on stderr when a job died of SIGXFSZ (a file reached RLIMIT_FSIZE): seen
# while the command runs, the command is stopped at once (the rest of it would run on a
# cut file); "File too large" (EFBIG, where the signal is ignored) is read at its end
FSIZE_KILLED = b"File size limit exceeded"
FSIZE_SIGNS = (FSIZE_KILLED, b"File too large")


Run = Callable[[OutputCallback], Awaitable[CommandOutput]]


async def run_within(
    run: Run,
    workspace: Path,
    limit: int,
    on_output: OutputCallback | None = None,
    measure: Measure = confined.usage,
) -> CommandOutput:
    """``run(on_output)`` (a command) stopped once the workspace grows past ``limit``.

    The output printed until then is kept. Cancellation reaches the command, whose clean-up
    (no process left) finishes before this re-raises.
    """
    out, err = HeadTail(), HeadTail()
    file_hit = asyncio.Event()  # a process died at the file size limit
    tail = b""  # the end of stderr so far (a sign split across two pieces)

    def tee(stream: str, data: bytes) -> None:
        nonlocal tail
        (out if stream == "stdout" else err).feed(data)
        if stream == "stderr":
            seen, tail = tail + data, (tail + data)[-len(FSIZE_KILLED) :]
            if FSIZE_KILLED in seen:
                file_hit.set()
        hand_output(on_output, stream, data)

    watcher = asyncio.ensure_future(watch(workspace, limit, measure))
    command = asyncio.ensure_future(run(tee))
    hit = asyncio.ensure_future(file_hit.wait())
    try:
        await asyncio.wait({command, watcher, hit}, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        watcher.cancel()
        hit.cancel()
        command.cancel()
        await _settle(command)
        raise
    failed = watcher.done() and not watcher.cancelled() and watcher.exception() is not None
    if command.done() or failed:
        watcher.cancel()
        hit.cancel()
        return _noted(await command, limit)
    stopped = file_limit_words(limit) if hit.done() else stopped_words(watcher.result(), limit)
    watcher.cancel()
    hit.cancel()
    command.cancel()
    await _settle(command)
    if command.done() and not command.cancelled():
        return _noted(command.result(), limit)  # it had ended before the stop reached it
    return CommandOutput(
        exit_code=None,
        stdout=out.value(),
        stderr=err.value(),
        stopped=stopped,
        stdout_dropped=out.dropped,
        stderr_dropped=err.dropped,
    )


class BudgetedRuntime(BaseRuntime):
    """A runtime whose commands run in a sandbox of its own (:meth:`_run_in_sandbox`), each
    held to the workspace budget by :func:`run_within`."""

    async def _run_command(
        self,
        command: str,
        workspace: Path,
        cwd: str,
        on_output: OutputCallback | None = None,
    ) -> CommandOutput:
        return await run_within(
            lambda tee: self._run_in_sandbox(command, workspace, cwd, tee),
            workspace,
            self.workspace_max_bytes,
            on_output,
        )

    async def _run_in_sandbox(
        self,
        command: str,
        workspace: Path,
        cwd: str,
        on_output: OutputCallback | None = None,
    ) -> CommandOutput:
        """The command alone, as :meth:`BaseRuntime._run_command` says it must run."""
        raise NotImplementedError


def _noted(out: CommandOutput, limit: int) -> CommandOutput:
    """A command in which a process was stopped at the file size limit (RLIMIT_FSIZE:
    SIGXFSZ, or EFBIG where the signal is ignored) failed, whatever its exit code (a shell
    that went on after it exits 0): its result says the limit stopped it."""
    xfsz = out.exit_code == 128 + signal.SIGXFSZ
    if (xfsz or any(sign in out.stderr for sign in FSIZE_SIGNS)) and not out.timed_out:
        return dataclasses.replace(out, stopped=file_limit_words(limit))
    return out


async def _settle(command: asyncio.Future[CommandOutput]) -> None:
    """Wait for the cancelled command's clean-up; a cancellation of ours re-raises (the
    clean-up goes on)."""
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.shield(command)
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError
    if not command.done():
        raise asyncio.CancelledError
