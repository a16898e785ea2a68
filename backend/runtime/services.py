"""Services: long-lived processes of a conversation's sandbox (a preview's app), started on
purpose and stopped by their owner (backend/previews), never by the end of an action.

Local runtime: the service runs under the same reaper and bubblewrap rules as a command
(:mod:`backend.runtime.reaper`: no process survives its stop or the server's death; the
sandbox's own network namespace, the same limits), with one more bind: ``socket_dir``, a
folder the server made, at :data:`SOCKET_DIR_INSIDE`. Beside the service runs the
forwarder (:mod:`backend.previews.forwarder`) with the sandbox's python3: it listens on Unix
sockets in that folder and joins their connections to ``127.0.0.1:<port>`` inside the
sandbox's namespace. Nothing of the host's network is opened to the sandbox.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from backend.previews import forwarder

if TYPE_CHECKING:
    from backend.runtime.local import LocalRuntime

SOCKET_DIR_INSIDE = "/.preview"
FORWARDER_SOURCE = Path(forwarder.__file__).read_text(encoding="utf-8")


def service_script(command: str, port: int, socket_dir: str, python: str = "python3") -> str:
    """The shell text a service runs: the forwarder in the background, then the command
    (the service ends when the command ends; its reaper then stops the forwarder)."""
    fwd = f"{shlex.quote(python)} -I -S -c {shlex.quote(FORWARDER_SOURCE)}"
    return f"{fwd} {shlex.quote(socket_dir)} {int(port)} &\n{command}"


async def spawn_local(
    runtime: LocalRuntime, workspace: Path, command: str, port: int, socket_dir: Path
) -> asyncio.subprocess.Process:
    """Start ``command`` as a service of ``workspace``'s sandbox; its stdout and stderr
    are pipes, its process the reaper's (a new session: the process group of the service)."""
    from backend.runtime.local import REAPER

    if runtime.sandbox is not None:
        env = runtime.sandbox.env(".")
        argv = runtime.sandbox.argv(workspace, ".")
        # one more bind before `--`: the folder of the forwarder's sockets
        wrapper = [*argv[:-1], "--bind", str(socket_dir), SOCKET_DIR_INSIDE, "--"]
        script = service_script(command, port, SOCKET_DIR_INSIDE)
    else:
        env = {**os.environ, "HOME": str(workspace), "PWD": str(workspace)}
        for secret in ("LLM_API_KEY", "AUTH_TOKEN", "AUTH_TOKENS"):
            env.pop(secret, None)
        wrapper = []
        script = service_script(command, port, str(socket_dir), sys.executable)
    env["PYTHONUNBUFFERED"] = "1"
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-I",
        "-S",
        REAPER,
        str(os.getpid()),
        script,
        *wrapper,
        cwd=workspace,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
