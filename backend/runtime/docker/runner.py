"""Commands through a sandbox's long-lived command runner (scripts/sandbox_runner.py).

The runner is started once per sandbox with ``docker exec -i python3 -c``; requests go to
its stdin, a reader thread parses its JSON lines and hands them to the event loop. A
sandbox whose image cannot start it (no python3) is marked, and gets one exec per command
(:mod:`backend.runtime.docker.execs`) from then on.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import secrets
import socket
import threading
from typing import Any

import anyio
import docker.errors
from docker.utils.socket import frames_iter

from backend.runtime.base import CommandOutput, OutputCallback, RuntimeUnavailable, hand_output
from backend.runtime.docker.containers import KILL_GRACE, SANDBOX_DIR, Sandbox, workdir
from backend.runtime.docker.engine import API_ERRORS, ContainerGone, is_gone
from backend.runtime.docker.sandboxes import FRESH, Sandboxes, out_of_memory
from backend.runtime.docker.scripts import RUNNER
from backend.runtime.docker.tasks import retrieve, settle, shielded
from backend.runtime.headtail import HeadTail

log = logging.getLogger(__name__)


class RunnerGone(Exception):
    """The command runner of a sandbox stopped (killed, or its container went away)."""


class RunnerRun:
    def __init__(
        self, loop: asyncio.AbstractEventLoop, on_output: OutputCallback | None = None
    ) -> None:
        self.out, self.err = HeadTail(), HeadTail()
        self.on_output = on_output  # live output, on the event loop (see _dispatch)
        self.done: asyncio.Future[dict[str, Any]] = loop.create_future()
        self.done.add_done_callback(retrieve)  # nobody may wait any more (cancelled)


class Runner:
    """Host side of a sandbox's command runner: requests out, events in.

    A reader thread parses the runner's JSON lines and hands them to the event loop.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, sock: Any) -> None:
        self.loop = loop
        self.sock = sock  # the hijacked stream (a SocketIO over a unix socket)
        self.raw: socket.socket = getattr(sock, "_sock", sock)
        self.alive = True
        self.hung_up = False  # we closed it (close()), rather than it died
        self.runs: dict[str, RunnerRun] = {}
        self.hello: asyncio.Future[int] = loop.create_future()
        self.hello.add_done_callback(retrieve)
        self._write_lock = threading.Lock()
        self.thread = threading.Thread(target=self._read, name="planact-sandbox-io", daemon=True)
        self.thread.start()

    def _read(self) -> None:
        buf = bytearray()
        try:
            for stream, data in frames_iter(self.sock, tty=False):  # type: ignore[no-untyped-call]
                if stream != 1:
                    log.debug("sandbox runner stderr: %r", data[:2000])
                    continue
                buf += data
                while (nl := buf.find(b"\n")) >= 0:
                    line = bytes(buf[:nl])
                    del buf[: nl + 1]
                    self._post(self._dispatch, json.loads(line))
        except Exception as exc:  # the socket was shut down or broke
            log.debug("sandbox runner stream ended: %s", exc)
        finally:
            for closing in (self.raw, self.sock, getattr(self.sock, "_response", None)):
                with contextlib.suppress(Exception):
                    closing.close()  # type: ignore[union-attr]
            self._post(self._gone)

    def _post(self, fn: Any, *args: Any) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
            self.loop.call_soon_threadsafe(fn, *args)

    def _dispatch(self, msg: dict[str, Any]) -> None:
        if "hello" in msg:
            if not self.hello.done():
                self.hello.set_result(int(msg["hello"]))
            return
        run = self.runs.get(msg.get("id", ""))
        if run is None:
            return
        if "out" in msg:
            data = base64.b64decode(msg["out"])
            run.out.feed(data)
            hand_output(run.on_output, "stdout", data)
        elif "err" in msg:
            data = base64.b64decode(msg["err"])
            run.err.feed(data)
            hand_output(run.on_output, "stderr", data)
        else:
            del self.runs[msg["id"]]
            if not run.done.done():
                run.done.set_result(msg)

    def _gone(self) -> None:
        self.alive = False
        if not self.hello.done():
            self.hello.set_exception(RunnerGone())
        runs, self.runs = self.runs, {}
        for run in runs.values():
            if not run.done.done():
                run.done.set_exception(RunnerGone())

    def _send(self, msg: dict[str, Any]) -> None:
        data = json.dumps(msg).encode() + b"\n"
        with self._write_lock:
            self.raw.sendall(data)

    def submit(
        self,
        rid: str,
        command: str,
        cwd: str,
        timeout: float,
        on_output: OutputCallback | None = None,
    ) -> RunnerRun:
        if not self.alive:
            raise RunnerGone
        run = RunnerRun(self.loop, on_output)
        self.runs[rid] = run
        try:
            self._send({"op": "run", "id": rid, "cmd": command, "cwd": cwd, "timeout": timeout})
        except OSError as exc:
            del self.runs[rid]
            raise RunnerGone from exc
        return run

    def kill(self, rid: str) -> None:
        with contextlib.suppress(OSError):
            self._send({"op": "kill", "id": rid})

    def close(self) -> None:
        """Hang up: the runner kills its commands and exits; the reader thread ends."""
        self.alive = False
        self.hung_up = True
        with contextlib.suppress(OSError):
            self.raw.shutdown(socket.SHUT_RDWR)


async def runner_for(sandboxes: Sandboxes, sandbox: Sandbox) -> Runner | None:
    """The sandbox's runner, started if needed; None when its image cannot run one.

    Raises ContainerGone when a sandbox that ran one before cannot any more (broken)."""
    if sandbox.no_runner:
        return None
    async with sandbox.runner_lock:
        if isinstance(sandbox.runner, Runner) and sandbox.runner.alive:
            return sandbox.runner
        sandbox.runner = None
        client = await sandboxes.engine.client()
        api: Any = client.api

        def start() -> Any:
            try:
                exec_id = api.exec_create(
                    sandbox.container_id,
                    ["python3", "-u", "-c", RUNNER],
                    stdin=True,
                    stdout=True,
                    stderr=True,
                    tty=False,
                    user=sandbox.user,
                    workdir=SANDBOX_DIR,
                )["Id"]
                sock = api.exec_start(exec_id, socket=True)
            except docker.errors.APIError as exc:
                if is_gone(exc):
                    raise ContainerGone from exc
                raise
            api._disable_socket_timeout(sock)
            return sock

        try:
            sock = await anyio.to_thread.run_sync(start)
        except ContainerGone:
            raise
        except API_ERRORS as exc:
            raise RuntimeUnavailable(f"could not start the sandbox's runner: {exc}") from exc
        runner = Runner(asyncio.get_running_loop(), sock)
        try:
            with anyio.fail_after(20):
                await runner.hello
        except BaseException as exc:
            runner.close()
            if not isinstance(exc, (RunnerGone, TimeoutError)):
                raise  # cancelled while starting
            if sandbox.had_runner:
                # it ran here before: the sandbox is broken (memory or pids exhausted)
                log.warning("docker runtime: the sandbox's runner cannot start; replacing it")
                raise ContainerGone from None
            log.warning(
                "docker runtime: the command runner does not start in %s (no python3?); "
                "running one docker exec per command",
                sandboxes.containers.image,
            )
            sandbox.no_runner = True
            return None
        sandbox.runner = runner
        sandbox.had_runner = True
        return runner


async def run_with_runner(
    sandboxes: Sandboxes,
    sandbox: Sandbox,
    runner: Runner,
    command: str,
    cwd: str,
    limit: float,
    on_output: OutputCallback | None = None,
) -> CommandOutput:
    """Run ``command`` through ``runner``; raises RunnerGone when the runner hung up before
    it could take the command."""
    rid = secrets.token_hex(8)
    run = runner.submit(rid, command, workdir(cwd), max(limit, 0.001), on_output)
    server_killed = False
    msg: dict[str, Any] | None = None
    try:
        with anyio.move_on_after(limit + KILL_GRACE):
            msg = await asyncio.shield(run.done)
        if msg is None:
            # the runner did not end it in time: ask again, then give up on the runner
            server_killed = True
            runner.kill(rid)
            with anyio.move_on_after(5):
                msg = await asyncio.shield(run.done)
            if msg is None:
                runner.close()
                await sandboxes.drop(sandbox)
    except RunnerGone:
        _, note = await sandboxes.post_mortem(sandbox, None)
        if not note and not runner.hung_up:
            # it died on its own: out of memory (a full /tmp keeps its memory, so the next
            # runner or command would die too) or killed by a command: replace the sandbox
            await shielded(sandboxes.drop(sandbox))
            note = f"The sandbox's command runner stopped (out of memory, or killed); {FRESH}."
        return CommandOutput(
            exit_code=None,
            stdout=run.out.value(),
            stderr=run.err.value(),
            note=note
            or "The sandbox's command runner stopped (was it killed?); the next command "
            "starts a new one.",
            stdout_dropped=run.out.dropped,
            stderr_dropped=run.err.dropped,
        )
    except BaseException:
        # cancelled (the run was stopped): the command dies before we go on
        runner.kill(rid)
        await shielded(settle(run.done, 5))
        raise
    if msg is not None and "error" in msg:
        raise RuntimeUnavailable(str(msg["error"]))
    timed_out = server_killed or bool(msg and msg.get("timeout"))
    note = ""
    if msg is not None and (msg.get("oom_kill") or msg.get("oom")):
        # memory ran out while it ran: what filled it (a tmpfs /tmp) may still hold it, so
        # the next command gets a fresh sandbox
        await shielded(sandboxes.drop(sandbox))
        note = out_of_memory(sandboxes.containers.limits.memory_words, killed=bool(msg.get("oom")))
    return CommandOutput(
        exit_code=None if timed_out or msg is None else int(msg["exit"]),
        stdout=run.out.value(),
        stderr=run.err.value(),
        timed_out=timed_out,
        note=note,
        stdout_dropped=run.out.dropped,
        stderr_dropped=run.err.dropped,
    )
