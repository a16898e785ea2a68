"""LocalRuntime: commands run as child processes of the server. Not a sandbox."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path

from backend.runtime.base import BaseRuntime, CommandOutput, HeadTail, OutputCallback


class LocalRuntime(BaseRuntime):
    name = "local"

    async def _run_command(
        self,
        command: str,
        workspace: Path,
        cwd: str,
        on_output: OutputCallback | None = None,
    ) -> CommandOutput:
        env = {**os.environ, "HOME": str(workspace), "PWD": str(workspace / cwd)}
        env.pop("LLM_API_KEY", None)
        env.pop("AUTH_TOKEN", None)
        env.pop("AUTH_TOKENS", None)
        proc = await asyncio.create_subprocess_exec(
            "/bin/bash",
            "-c",
            command,
            cwd=workspace / cwd,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        out, err = HeadTail(), HeadTail()

        async def pump(stream: asyncio.StreamReader | None, sink: HeadTail, name: str) -> None:
            assert stream is not None
            while chunk := await stream.read(65536):
                sink.feed(chunk)
                if on_output is not None:
                    on_output(name, chunk)

        readers = asyncio.gather(pump(proc.stdout, out, "stdout"), pump(proc.stderr, err, "stderr"))
        timed_out = False
        try:
            try:
                await asyncio.wait_for(proc.wait(), self.terminal_timeout)
            except TimeoutError:
                timed_out = True
                _kill_group(proc.pid)
                await proc.wait()
            # children that kept the pipes open must not keep us waiting
            _kill_group(proc.pid)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(readers), 5)
        except BaseException:
            _kill_group(proc.pid)
            readers.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(proc.wait(), 5)
            raise
        finally:
            if not readers.done():
                readers.cancel()
        code = proc.returncode
        if code is not None and code < 0:
            code = 128 - code  # killed by a signal: report it the way shells do (137 = KILL)
        return CommandOutput(
            exit_code=None if timed_out else code,
            stdout=out.value(),
            stderr=err.value(),
            timed_out=timed_out,
            stdout_dropped=out.dropped,
            stderr_dropped=err.dropped,
        )


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
