"""Services in a docker sandbox (a preview's app, backend/previews): a ``docker exec`` in the
conversation's container that outlives the action.

The service runs as the sandbox user, as the commands do (it reads and writes what they
wrote, and the container's limits hold for it: memory, processes, CPU, the file size
``ulimit``). The command runner's clean-up after a command spares it: a session led by a
``docker exec`` (parent outside the container) is a service, which no command can make or
join (scripts/sandbox_runner.py). Stopping it kills its session and every descendant
(scripts/service_stop.py, the exec found by its ``PLANACT_SERVICE`` token). Its stdin is
the server's connection: when the server goes away (killed too), a watchdog of the service
kills every process of the sandbox user, as the runner does. It holds its sandbox busy (no
idle removal, no sweep) while it runs; the container's removal (delete, the server's end, a
dead owner reaped) ends it too. Its forwarder listens in a folder of the workspace
(``/workspace/.preview/<id>``): the server reaches it through
:mod:`backend.previews.sockets`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import socket
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from docker.utils.socket import frames_iter

from backend.runtime.docker.containers import ENVIRONMENT, SANDBOX_DIR, Sandbox
from backend.runtime.docker.engine import API_ERRORS
from backend.runtime.docker.scripts import SERVICE_STOP
from backend.runtime.services import service_script

if TYPE_CHECKING:
    from backend.runtime.docker.engine import Engine
    from backend.runtime.docker.sandboxes import Sandboxes

log = logging.getLogger(__name__)

STOP_WAIT = 10.0
# The service's stdin is the server's connection. At its end while the service's shell (or
# what it exec'd) lives, the server went away: every process of the sandbox user is killed.
# At its end after the service ended (the server hangs up then), the watchdog just exits.
# The command reads nothing from it (PLANACT_SERVICE stays in its environment: what the
# shell exec's is found by it too); the watchdog is no job of the shell's (a `wait` in the
# command does not wait for it).
WATCHDOG = (
    "exec 3<&0 </dev/null\n"
    "root=$$\n"
    "((while read -r -u 3 _; do :; done\n"
    ' s=$(cat "/proc/$root/stat" 2>/dev/null) && [[ $s != *") Z "* ]] && kill -KILL -1'
    ") >/dev/null 2>&1 &)\n"
    "exec 3<&-\n"
)


class ExecProcess:
    """A detached-lifetime exec, looking like an asyncio subprocess to its Service."""

    def __init__(
        self, engine: Engine, sandbox: Sandbox, user: str, exec_id: str, token: str
    ) -> None:
        self.engine = engine
        self.sandbox = sandbox
        self.user = user
        self.exec_id = exec_id
        self.token = token  # its PLANACT_SERVICE: how service_stop.py finds it
        self.stdout = asyncio.StreamReader()
        self.stderr = asyncio.StreamReader()
        self.returncode: int | None = None
        self.pid = 0
        self._loop = asyncio.get_running_loop()
        self._done: asyncio.Future[int] = self._loop.create_future()
        self._sock: Any = None

    def start(self, client: Any) -> None:
        """Start the exec and pump its output (a thread); called on a worker thread."""
        sock = client.api.exec_start(self.exec_id, socket=True)
        client.api._disable_socket_timeout(sock)
        self._sock = sock
        threading.Thread(target=self._pump, args=(client, sock), daemon=True).start()

    def _pump(self, client: Any, sock: Any) -> None:
        try:
            for stream, data in frames_iter(sock, tty=False):  # type: ignore[no-untyped-call]
                if stream == 1:
                    self._loop.call_soon_threadsafe(self.stdout.feed_data, data)
                elif stream == 2:
                    self._loop.call_soon_threadsafe(self.stderr.feed_data, data)
        except Exception:  # the container went away
            pass
        code = -1
        with contextlib.suppress(*API_ERRORS):
            code = client.api.exec_inspect(self.exec_id).get("ExitCode") or 0
        self._hang_up()  # its watchdog, left behind, sees the service gone and exits
        self._loop.call_soon_threadsafe(self._finish, code)

    def _hang_up(self) -> None:
        raw = getattr(self._sock, "_sock", self._sock)
        with contextlib.suppress(Exception):
            raw.shutdown(socket.SHUT_RDWR)
        for closable in (self._sock, raw):
            with contextlib.suppress(Exception):
                closable.close()

    def _finish(self, code: int) -> None:
        self.stdout.feed_eof()
        self.stderr.feed_eof()
        if self.returncode is None:
            self.returncode = code
            self.sandbox.busy -= 1
            self.sandbox.last_used = time.monotonic()
        if not self._done.done():
            self._done.set_result(code)

    async def wait(self) -> int:
        return await asyncio.shield(self._done)

    def kill(self) -> None:
        self._loop.create_task(self.stop())

    async def stop(self) -> None:
        """Kill the service's session and all it started in the container; wait for the
        exec."""
        if self._done.done():
            return
        client = self.engine.current

        def kill_all() -> None:
            if client is None:
                return
            with contextlib.suppress(*API_ERRORS):
                kill = client.api.exec_create(
                    self.sandbox.container_id,
                    ["python3", "-I", "-S", "-c", SERVICE_STOP, self.token],
                    user=self.user,
                )["Id"]
                client.api.exec_start(kill)

        await anyio.to_thread.run_sync(kill_all)
        try:
            async with asyncio.timeout(STOP_WAIT):
                await self.wait()
        except TimeoutError:
            # hanging up makes its watchdog kill every process of the sandbox user
            await anyio.to_thread.run_sync(self._hang_up)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(STOP_WAIT):
                    await self.wait()


async def spawn_docker(
    engine: Engine,
    sandboxes: Sandboxes,
    workspace: Path,
    command: str,
    port: int,
    socket_dir: Path,
) -> ExecProcess:
    import os

    key = os.path.realpath(workspace)
    sandbox = await sandboxes.acquire(key)  # busy until the service ends
    try:
        user = sandbox.user  # the commands' own
        token = secrets.token_hex(12)
        inside = f"{SANDBOX_DIR}/{Path(socket_dir).relative_to(key).as_posix()}"
        script = WATCHDOG + service_script(command, port, inside)
        client = await engine.client()
        env = {**ENVIRONMENT, "PYTHONUNBUFFERED": "1", "PLANACT_SERVICE": token}

        def create() -> str:
            return str(
                client.api.exec_create(
                    sandbox.container_id,
                    ["bash", "-c", script],
                    user=user,
                    workdir=SANDBOX_DIR,
                    environment=env,
                    stdin=True,
                    stdout=True,
                    stderr=True,
                    tty=False,
                )["Id"]
            )

        exec_id = await anyio.to_thread.run_sync(create)
        process = ExecProcess(engine, sandbox, user, exec_id, token)
        await anyio.to_thread.run_sync(process.start, client)
        return process
    except BaseException:
        sandbox.busy -= 1
        raise
