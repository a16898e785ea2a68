"""Commands as one ``docker exec`` each, under scripts/wrapper.sh: for images without
python3, and when a sandbox's runner hung up. The wrapper reports through a trailer line of
stderr marked with a per-run nonce; scripts/killer.sh stops a run, scripts/sweeper.sh kills
what runs left behind."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import threading
from typing import Any

import anyio
import docker.errors

from backend.runtime.base import CommandOutput, OutputCallback, RuntimeUnavailable, hand_output
from backend.runtime.docker.containers import KILL_GRACE, Sandbox, workdir
from backend.runtime.docker.engine import API_ERRORS, ContainerGone, close_stream, is_gone
from backend.runtime.docker.sandboxes import Sandboxes, out_of_memory
from backend.runtime.docker.scripts import KILLER, SWEEPER, WRAPPER
from backend.runtime.docker.tasks import shielded
from backend.runtime.headtail import HeadTail

log = logging.getLogger(__name__)


class ExecRun:
    """One exec: its stream, so that another thread can close it, and whether it started."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.started = False
        self.abandoned = False
        self.stream: Any = None

    def abandon(self) -> bool:
        """Stop the run from starting; True when it had already started."""
        with self.lock:
            self.abandoned = True
            return self.started

    def close_stream(self) -> None:
        with self.lock:
            stream = self.stream
        if stream is not None:
            close_stream(stream)


class LiveExec:
    """Hands an exec's output to ``on_output`` on the event loop (from the pump thread).
    Standard error goes by whole lines, without the wrapper's own marker lines."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, on_output: OutputCallback, run_id: str
    ) -> None:
        self.loop = loop
        self.on_output = on_output
        self.markers = (f"@planact-start:{run_id}".encode(), f"@planact:{run_id}:".encode())
        self.err_line = bytearray()
        self.held_blank = False  # an empty line: the trailer's own line break, or output

    def feed(self, out: bytes | None, err: bytes | None) -> None:
        if out:
            self._post("stdout", out)
        if not err:
            return
        self.err_line += err
        cut = self.err_line.rfind(b"\n")
        if cut < 0:
            return
        lines, self.err_line = bytes(self.err_line[: cut + 1]), self.err_line[cut + 1 :]
        kept: list[bytes] = []
        for line in lines.splitlines(keepends=True):
            if line.startswith(self.markers):
                if line.startswith(self.markers[1]):
                    self.held_blank = False  # the trailer's leading line break
                continue
            if self.held_blank:
                kept.append(b"\n")
                self.held_blank = False
            if line == b"\n":
                self.held_blank = True
                continue
            kept.append(line)
        if kept:
            self._post("stderr", b"".join(kept))

    def _post(self, stream: str, data: bytes) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody listens
            self.loop.call_soon_threadsafe(hand_output, self.on_output, stream, data)


async def run_with_exec(
    sandboxes: Sandboxes,
    sandbox: Sandbox,
    command: str,
    cwd: str,
    limit: float,
    on_output: OutputCallback | None = None,
) -> CommandOutput:
    """Run ``command`` as one exec; raises ContainerGone when no process could start in
    the sandbox (the command did not run)."""
    run_id, exec_id = await _create(sandboxes, sandbox, command, cwd, limit)
    client = await sandboxes.engine.client()
    api: Any = client.api
    out, err = HeadTail(), HeadTail()
    run = ExecRun()
    live = LiveExec(asyncio.get_running_loop(), on_output, run_id) if on_output else None

    def pump() -> None:
        with run.lock:
            if run.abandoned:
                return
            try:
                stream = api.exec_start(exec_id, stream=True, demux=True)
            except docker.errors.APIError as exc:
                if is_gone(exc):  # stopped since the exec was made: nothing ran
                    raise ContainerGone from exc
                raise
            run.started = True
            run.stream = stream
        try:
            # the stream may stay silent for the whole timeout: no socket timeout
            api._disable_socket_timeout(api._get_raw_response_socket(stream._response))
            for chunk_out, chunk_err in stream:
                if chunk_out:
                    out.feed(chunk_out)
                if chunk_err:
                    err.feed(chunk_err)
                if live is not None:
                    live.feed(chunk_out, chunk_err)
        finally:
            close_stream(stream)

    server_killed = False
    try:
        with anyio.move_on_after(limit + KILL_GRACE) as deadline:
            await anyio.to_thread.run_sync(pump, abandon_on_cancel=True)
        if deadline.cancelled_caught:
            # the wrapper did not end it (e.g. the sandbox could not fork): do it here
            server_killed = True
            await kill_exec(sandboxes, sandbox, run, run_id)
    except ContainerGone:
        raise
    except BaseException:
        # cancelled (the run was stopped) or the engine went away: the command dies too
        await shielded(kill_exec(sandboxes, sandbox, run, run_id))
        raise

    stderr = err.value()
    started = f"@planact-start:{run_id}\n".encode()
    if stderr.startswith(started):
        stderr = stderr[len(started) :]
    elif not server_killed:
        # the wrapper never ran: the engine could not start a process in the sandbox
        # (out of memory or pids): replace it; the command has not run
        log.warning("docker runtime: no process starts in the sandbox; replacing it")
        raise ContainerGone
    trailer = stderr.rfind(f"\n@planact:{run_id}:".encode())
    if trailer >= 0 and not server_killed:
        exit_code, timed_out, oom = read_trailer(stderr[trailer:])
        stderr = stderr[:trailer]
        note = ""
        if oom:
            # memory ran out while it ran (what filled it may still hold it): the next
            # command gets a fresh sandbox
            await shielded(sandboxes.drop(sandbox))
            note = out_of_memory(sandboxes.containers.limits.memory_words, killed=exit_code == 137)
        return CommandOutput(
            exit_code=None if timed_out else exit_code,
            stdout=out.value(),
            stderr=stderr,
            timed_out=timed_out,
            note=note,
            stdout_dropped=out.dropped,
            stderr_dropped=err.dropped,
        )
    # no trailer: the wrapper itself was killed, or the container went away
    code, note = await sandboxes.post_mortem(sandbox, exec_id)
    return CommandOutput(
        exit_code=None if server_killed else code,
        stdout=out.value(),
        stderr=stderr,
        timed_out=server_killed,
        note=note,
        stdout_dropped=out.dropped,
        stderr_dropped=err.dropped,
    )


def read_trailer(trailer: bytes) -> tuple[int, bool, bool]:
    """(exit code, timed out, OOM-killed) of wrapper.sh's last line
    ``\\n@planact:RUN_ID:EXIT:TIMED_OUT:OOM``."""
    fields = trailer.decode("ascii", "replace").strip().split(":")
    return int(fields[2]), fields[3] == "1", fields[4] == "1"


async def _create(
    sandboxes: Sandboxes, sandbox: Sandbox, command: str, cwd: str, limit: float
) -> tuple[str, str]:
    client = await sandboxes.engine.client()
    run_id = secrets.token_hex(8)
    argv = ["bash", "-c", WRAPPER, "planact", run_id, f"{max(limit, 0.001):.3f}", command]

    def create() -> str:
        try:
            created = client.api.exec_create(
                sandbox.container_id,
                argv,
                stdout=True,
                stderr=True,
                stdin=False,
                tty=False,
                workdir=workdir(cwd),
                user=sandbox.user,
            )
        except docker.errors.APIError as exc:
            if is_gone(exc):  # "container ... is not running"
                raise ContainerGone from exc
            raise
        return str(created["Id"])

    try:
        return run_id, await anyio.to_thread.run_sync(create)
    except ContainerGone:
        raise
    except API_ERRORS as exc:
        raise RuntimeUnavailable(f"could not start the command in the sandbox: {exc}") from exc


async def kill_exec(sandboxes: Sandboxes, sandbox: Sandbox, run: ExecRun, run_id: str) -> None:
    """Kill a run's processes inside the container (cancel, or the server's deadline)."""
    if not run.abandon():
        return  # never started
    client = sandboxes.engine.current
    if client is None:
        return

    def kill() -> None:
        try:
            client.api.exec_start(
                client.api.exec_create(
                    sandbox.container_id,
                    ["bash", "-c", KILLER, "planact-kill", run_id],
                    user=sandbox.user,
                )["Id"]
            )
        except API_ERRORS as exc:
            log.warning(
                "docker runtime: could not kill run %s, killing its sandbox: %s", run_id, exc
            )
            with contextlib.suppress(*API_ERRORS):
                client.api.kill(sandbox.container_id)
        run.close_stream()

    await anyio.to_thread.run_sync(kill)


async def sweep(sandboxes: Sandboxes, sandbox: Sandbox) -> None:
    """Kill every process of the sandbox user (no command of ours runs there now)."""
    client = sandboxes.engine.current
    if client is None:
        return

    def run() -> None:
        try:
            exec_id = client.api.exec_create(
                sandbox.container_id, ["bash", "-c", SWEEPER], user=sandbox.user
            )["Id"]
            client.api.exec_start(exec_id)
        except API_ERRORS as exc:
            log.debug("docker runtime: sweep of %s failed: %s", sandbox.key, exc)

    await anyio.to_thread.run_sync(run)
