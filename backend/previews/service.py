"""One running service of a preview: its process (a reaper over the sandboxed command and
the forwarder), its last lines of output, its state, and the readiness check through the
forwarder's probe socket."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from backend.previews.sockets import fd_path, open_socket
from backend.runtime.base import OutputCallback, hand_output
from backend.runtime.local import _stop

PROBE_EVERY = 0.05  # seconds between two checks of the port while it starts


class Service:
    def __init__(
        self, process: Any, socket_dir: Path, keep: int, trusted: str | None = None
    ) -> None:
        self.process = process  # an asyncio subprocess, or one that looks like it (docker)
        self.socket_dir = socket_dir
        self.trusted = trusted  # below it the sandbox may write: reached by sockets.py
        self.log: deque[str] = deque(maxlen=keep)
        self.state = "starting"
        self.on_output: OutputCallback | None = None  # the starting action's live output
        self.on_change: Callable[[], None] | None = None  # new lines or an exit
        self._partial = {"stdout": b"", "stderr": b""}
        self._pumps = [
            asyncio.create_task(self._pump(process.stdout, "stdout")),
            asyncio.create_task(self._pump(process.stderr, "stderr")),
        ]
        self.exited = asyncio.ensure_future(self._wait())

    @property
    def data_socket(self) -> Path:
        return self.socket_dir / "s"

    async def _pump(self, stream: asyncio.StreamReader | None, name: str) -> None:
        assert stream is not None
        while chunk := await stream.read(65536):
            hand_output(self.on_output, name, chunk)
            lines = (self._partial[name] + chunk).split(b"\n")
            self._partial[name] = lines.pop()[-4096:]
            for line in lines:
                self.log.append(line.decode("utf-8", "replace").rstrip("\r"))
            if self.on_change is not None:
                self.on_change()
        if self._partial[name]:
            self.log.append(self._partial[name].decode("utf-8", "replace"))

    async def _wait(self) -> int:
        code: int = await self.process.wait()
        with contextlib.suppress(Exception):
            await asyncio.wait(self._pumps, timeout=2)
        if self.state in ("starting", "ready"):
            self.state = "failed" if self.state == "starting" else "stopped"
        if self.on_change is not None:
            self.on_change()
        return code

    async def probe(self) -> bool:
        """Whether something accepts connections on the port inside the sandbox."""
        try:
            fd = open_socket(str(self.socket_dir / "probe"), self.trusted)
        except OSError:
            return False
        try:
            reader, writer = await asyncio.open_unix_connection(fd_path(fd))
        except OSError:
            return False
        finally:
            os.close(fd)
        try:
            return await reader.read(1) == b"1"
        except OSError:
            return False
        finally:
            writer.close()

    async def wait_ready(self, within: float) -> str | None:
        """None when the port accepts connections; else why not (exited, timed out)."""
        deadline = time.monotonic() + within
        while True:
            if self.exited.done():
                code = self.process.returncode
                return f"The service exited (status {code}) before its port accepted connections."
            if await self.probe():
                self.state = "ready"
                return None
            if time.monotonic() >= deadline:
                return f"Nothing accepted connections on the port within {within:g} seconds."
            await asyncio.wait({self.exited}, timeout=PROBE_EVERY)

    async def stop(self, state: str = "stopped") -> None:
        """Stop the service and everything it started (its reaper kills the whole tree);
        its state is ``state`` once it is gone."""
        if self.process.returncode is None:
            own_stop = getattr(self.process, "stop", None)
            await (own_stop() if own_stop is not None else _stop(self.process))
        await asyncio.shield(self.exited)
        self.state = state  # only once nothing of it is left
