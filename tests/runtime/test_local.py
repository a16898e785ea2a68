"""What only the local runtime does: its wrapper outlives no server."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from tests.procs import alive
from tests.support.runtime import eventually, wait_for_file

# a server stand-in: runs one command that leaves escaped processes, never returns
SERVER = r"""
import asyncio, sys
from pathlib import Path
from backend.actions.registry import run_action
from backend.actions.model import Action
from backend.runtime.local import LocalRuntime

command = (
    "setsid sh -c 'sleep 1000 & echo $! > setsid.pid'; "
    "(sh -c 'sleep 1001 & echo $! > double.pid' &); sleep 1002"
)
action = Action("terminal_run", {"command": command})
asyncio.run(run_action(LocalRuntime(), action, Path(sys.argv[1])))
"""


async def test_commands_die_with_a_crashed_server(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    server = await asyncio.create_subprocess_exec(
        sys.executable, "-c", SERVER, str(workspace), cwd=Path(__file__).parents[2]
    )
    try:
        await wait_for_file(workspace / "setsid.pid")
        await wait_for_file(workspace / "double.pid")
        pids = [int((workspace / f).read_text()) for f in ("setsid.pid", "double.pid")]
        assert all(alive(pid) for pid in pids)
        os.kill(server.pid, signal.SIGKILL)  # no clean-up code of the server runs
        await server.wait()

        async def gone() -> bool:
            return not any(alive(pid) for pid in pids)

        await eventually(gone, what="the processes of a crashed server's command to die")
    finally:
        if server.returncode is None:
            server.kill()
            await server.wait()


async def test_reap_owners_has_nothing_to_reap() -> None:
    from backend.runtime.local import LocalRuntime

    assert await LocalRuntime().reap_owners(["dead-owner"]) == 0
