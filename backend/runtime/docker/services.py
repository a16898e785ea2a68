"""Services in a docker sandbox (a preview's app, backend/previews): a ``docker exec`` in the
conversation's container that outlives the action.

The service runs as a uid of its own (the sandbox user's group), so that the command
runner's clean-up after every command (it kills every process of the sandbox user) leaves
it alone, and so that stopping it (``kill -KILL -1`` as that uid) kills all it started and
nothing else. It holds its sandbox busy (no idle removal, no sweep) while it runs; the
container's removal (delete, the server's end, a dead owner reaped) ends it. Its forwarder
listens in a folder of the workspace (``/workspace/.preview/<id>``): the server reaches it
through :mod:`backend.previews.sockets`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from backend.runtime.docker.containers import ENVIRONMENT, SANDBOX_DIR, Sandbox
from backend.runtime.docker.engine import API_ERRORS, close_stream
from backend.runtime.services import service_script

if TYPE_CHECKING:
    from backend.runtime.docker.engine import Engine
    from backend.runtime.docker.sandboxes import Sandboxes

log = logging.getLogger(__name__)

SERVICE_UID_OFFSET = 100_000  # a service's uid: the sandbox user's + this + a counter
STOP_WAIT = 10.0
_slots = itertools.count()


class ExecProcess:
    """A detached-lifetime exec, looking like an asyncio subprocess to its Service."""

    def __init__(self, engine: Engine, sandbox: Sandbox, user: str, exec_id: str) -> None:
        self.engine = engine
        self.sandbox = sandbox
        self.user = user
        self.exec_id = exec_id
        self.stdout = asyncio.StreamReader()
        self.stderr = asyncio.StreamReader()
        self.returncode: int | None = None
        self.pid = 0
        self._loop = asyncio.get_running_loop()
        self._done: asyncio.Future[int] = self._loop.create_future()
        self._stream: Any = None
        self._lock = threading.Lock()

    def start(self, client: Any) -> None:
        """Start the exec and pump its output (a thread); called on a worker thread."""
        stream = client.api.exec_start(self.exec_id, stream=True, demux=True)
        with self._lock:
            self._stream = stream
        threading.Thread(target=self._pump, args=(client, stream), daemon=True).start()

    def _pump(self, client: Any, stream: Any) -> None:
        try:
            for out, err in stream:
                if out:
                    self._loop.call_soon_threadsafe(self.stdout.feed_data, out)
                if err:
                    self._loop.call_soon_threadsafe(self.stderr.feed_data, err)
        except Exception:  # the container went away
            pass
        code = -1
        with contextlib.suppress(*API_ERRORS):
            code = client.api.exec_inspect(self.exec_id).get("ExitCode") or 0
        self._loop.call_soon_threadsafe(self._finish, code)

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
        """Kill every process of the service's uid in the container; wait for the exec."""
        if self._done.done():
            return
        client = self.engine.current

        def kill_all() -> None:
            if client is None:
                return
            with contextlib.suppress(*API_ERRORS):
                kill = client.api.exec_create(
                    self.sandbox.container_id, ["bash", "-c", "kill -KILL -1"], user=self.user
                )["Id"]
                client.api.exec_start(kill)

        await anyio.to_thread.run_sync(kill_all)
        try:
            async with asyncio.timeout(STOP_WAIT):
                await self.wait()
        except TimeoutError:
            with self._lock:
                if self._stream is not None:
                    close_stream(self._stream)
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
        uid, gid = (int(x) for x in sandbox.user.split(":"))
        user = f"{uid + SERVICE_UID_OFFSET + next(_slots) % 50_000}:{gid}"
        inside = f"{SANDBOX_DIR}/{Path(socket_dir).relative_to(key).as_posix()}"
        script = service_script(command, port, inside)
        client = await engine.client()
        env = {**ENVIRONMENT, "PYTHONUNBUFFERED": "1"}

        def create() -> str:
            return str(
                client.api.exec_create(
                    sandbox.container_id,
                    ["bash", "-c", script],
                    user=user,
                    workdir=SANDBOX_DIR,
                    environment=env,
                    stdout=True,
                    stderr=True,
                )["Id"]
            )

        exec_id = await anyio.to_thread.run_sync(create)
        process = ExecProcess(engine, sandbox, user, exec_id)
        await anyio.to_thread.run_sync(process.start, client)
        return process
    except BaseException:
        sandbox.busy -= 1
        raise
