"""Limits while a command runs, in both sandboxed runtimes (docs/security.md, "Limits while a
command runs"): the workspace budget, processes, memory, the private /tmp, no inherited
file descriptor. Hogs are kept small (caps of a few hundred MB and processes, short
timeouts): the machine running the suite is shared.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from backend.runtime import confined
from backend.runtime.base import ActionResult
from tests.support.runtime import RuntimeFactory, run, stdout_of, wait_for_file

MB = 1024 * 1024
SANDBOXED = [
    pytest.param("local-bwrap", marks=pytest.mark.bwrap),
    pytest.param("docker", marks=pytest.mark.docker),
]
pytestmark = pytest.mark.parametrize("make_rt", SANDBOXED, indirect=True)


def conversation(tmp_path: Path, n: int) -> Path:
    ws = tmp_path / "workspace" / "user_1" / f"Conversation_{n}"
    ws.mkdir(parents=True, exist_ok=True)
    return ws


async def test_one_file_stops_at_the_workspace_budget(
    make_rt: RuntimeFactory, tmp_path: Path
) -> None:
    rt = make_rt(workspace_max_mb=50)
    ws = conversation(tmp_path, 1)
    result = await run(rt, ws, "head -c 120M /dev/zero > big.bin")
    assert result.status == "failure"
    assert "workspace limit of 50 MB (WORKSPACE_MAX_MB)" in result.content
    assert (ws / "big.bin").stat().st_size <= 50 * MB
    assert confined.usage(ws) <= 50 * MB


async def test_a_command_that_goes_on_after_a_file_hit_the_budget_fails_saying_so(
    make_rt: RuntimeFactory, tmp_path: Path
) -> None:
    """The shell went on after `head` was stopped at the limit and exited 0: the result was
    `success` before ("Exit code: 0 … A file reached the workspace limit")."""
    rt = make_rt(workspace_max_mb=50)
    ws = conversation(tmp_path, 1)
    result = await run(rt, ws, "head -c 120M /dev/zero > big.bin; echo done")
    assert result.status == "failure"
    assert result.content.startswith(
        "Stopped: a file reached the workspace limit of 50 MB (WORKSPACE_MAX_MB)"
    )
    assert "WORKSPACE_MAX_MB" in result.data[0]["note"]
    assert (ws / "big.bin").stat().st_size <= 50 * MB


async def test_a_file_at_the_budget_stops_the_command_while_it_runs(
    make_rt: RuntimeFactory, tmp_path: Path
) -> None:
    """What would run after the cut file (here a wait past the command timeout) does not:
    the command is stopped as soon as its shell reports the writer stopped at the limit."""
    rt = make_rt(workspace_max_mb=50, terminal_timeout=20)
    ws = conversation(tmp_path, 1)
    result = await run(rt, ws, "head -c 120M /dev/zero > big.bin; sleep 60; echo late")
    assert result.status == "failure"
    assert result.content.startswith("Stopped: a file reached the workspace limit")
    assert "timed out" not in result.content and "late" not in stdout_of(result)
    assert result.data[0]["exit_code"] is None


# writes 2 MB files (120 MB in all) in a process of its own session, slowly enough that the
# watcher stops it on the way; "finished" is never printed when it is stopped
MANY_FILES = (
    "setsid sh -c 'i=0; while [ $i -lt 60 ]; do i=$((i+1)); "
    "head -c 2M /dev/zero > f$i.bin; sleep 0.05; done; echo finished > done.txt' & wait; "
    "echo finished"
)


async def test_many_files_are_stopped_during_the_command(
    make_rt: RuntimeFactory, tmp_path: Path
) -> None:
    rt = make_rt(workspace_max_mb=50)
    ws = conversation(tmp_path, 1)
    result = await run(rt, ws, MANY_FILES)
    assert result.status == "failure"
    assert result.content.startswith("Stopped: the workspace grew to")
    assert "past its limit of 50 MB (WORKSPACE_MAX_MB)" in result.content
    assert "finished" not in stdout_of(result)
    assert result.data[0]["exit_code"] is None
    assert "WORKSPACE_MAX_MB" in result.data[0]["note"]
    used = confined.usage(ws)
    assert 50 * MB < used <= 80 * MB  # stopped on the way, not far past the budget
    # the writer (its own session) died with the command: nothing grows any more
    files = len(list(ws.glob("f*.bin")))
    check = await run(rt, ws, "a=$(ls | wc -l); sleep 0.5; b=$(ls | wc -l); echo $a $b")
    before, after = stdout_of(check).split()
    assert before == after
    assert len(list(ws.glob("f*.bin"))) == files
    assert not (ws / "done.txt").exists()
    # a workspace over its budget can still be cleaned up (only growth is stopped)
    cleaned = await run(rt, ws, "rm f*.bin && echo cleaned")
    assert cleaned.ok, cleaned.content
    assert confined.usage(ws) == 0


async def test_a_command_within_the_budget_is_not_stopped(
    make_rt: RuntimeFactory, tmp_path: Path
) -> None:
    rt = make_rt(workspace_max_mb=50)
    ws = conversation(tmp_path, 1)
    result = await run(rt, ws, "head -c 20M /dev/zero > a.bin && sleep 0.3 && echo ok")
    assert result.ok, result.content
    assert stdout_of(result) == "ok\n"


# forks until refused (or 800), records how many, then waits for the test's go-ahead
FORKS = """
import os, sys, time
n = 0
try:
    for _ in range(800):
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
        n += 1
except OSError as exc:
    print("refused:", exc.strerror)
open("forked.txt", "w").write(str(n))
for _ in range(600):
    if os.path.exists("go.txt"):
        break
    time.sleep(0.05)
print("forked", n)
"""


async def answers(rt: object, ws: Path) -> ActionResult:
    result = await run(rt, ws, "echo alive")  # type: ignore[arg-type]
    assert result.ok, result.content
    assert stdout_of(result) == "alive\n"
    return result


async def test_processes_are_capped_per_conversation(
    make_rt: RuntimeFactory, tmp_path: Path
) -> None:
    rt = make_rt(sandbox_pids=64)
    hog_ws, other_ws = conversation(tmp_path, 1), conversation(tmp_path, 2)
    (hog_ws / "forks.py").write_text(FORKS)
    hog = asyncio.ensure_future(run(rt, hog_ws, "python3 forks.py"))
    try:
        await wait_for_file(hog_ws / "forked.txt", within=30)
        forked = int((hog_ws / "forked.txt").read_text())
        assert forked < 64
        await answers(rt, other_ws)  # another conversation still runs and answers
        (hog_ws / "go.txt").write_text("go")
        result = await hog
    finally:
        (hog_ws / "go.txt").write_text("go")
        await asyncio.gather(hog, return_exceptions=True)
    assert "refused: Resource temporarily unavailable" in stdout_of(result)
    await answers(rt, hog_ws)  # and the conversation itself again, once they are gone


HOG = "python3 -c \"b = b'x' * (600 * 1024 * 1024); print('survived', len(b))\""


async def test_a_memory_hog_is_killed(make_rt: RuntimeFactory, tmp_path: Path) -> None:
    rt = make_rt(sandbox_memory_mb=192)
    hog_ws, other_ws = conversation(tmp_path, 1), conversation(tmp_path, 2)
    result = await run(rt, hog_ws, HOG)
    assert result.status == "failure"
    assert "survived" not in result.content
    assert "out of memory" in result.content
    await answers(rt, other_ws)
    await answers(rt, hog_ws)


async def test_the_private_tmp_is_capped(make_rt: RuntimeFactory, tmp_path: Path) -> None:
    rt = make_rt(sandbox_tmp_mb=32)
    ws = conversation(tmp_path, 1)
    result = await run(rt, ws, "head -c 400M /dev/zero > /tmp/big; stat -c %s /tmp/big")
    assert "No space left on device" in result.content
    assert int(stdout_of(result)) <= 32 * MB
    await answers(rt, conversation(tmp_path, 2))


# plays the server: inherits the test's pipe as its parent's, runs one command on the
# server's event loop (uvloop, as uvicorn runs it) with the server's runtime, prints it
SERVER = """
import sys, uvloop
from pathlib import Path
from typing import Any
from backend.actions.model import Action
from backend.actions.registry import run_action
from backend.config import Settings
kind, ws = sys.argv[1], Path(sys.argv[2])
settings = Settings()
async def main():
    if kind == "docker":
        from backend.runtime import make_runtime
        rt = make_runtime(settings, "docker")
    else:
        from backend.runtime.sandboxing import local_runtime_for_process
        rt = local_runtime_for_process(settings)
    try:
        command = "python3 -c 'import os; print(sorted(os.listdir(\\"/proc/self/fd\\")))'"
        result = await run_action(rt, Action("terminal_run", {"command": command}), ws)
        print(result.content)
    finally:
        await rt.close()
uvloop.run(main())
"""


async def test_a_command_sees_only_its_standard_descriptors(
    make_rt: RuntimeFactory, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    kind = "docker" if request.node.callspec.params["make_rt"] == "docker" else "local"
    ws = conversation(tmp_path, 1)
    env = {
        **os.environ,
        "RUNTIME": kind,
        "LOCAL_SANDBOX": "bwrap",
        "WORKSPACE_DIR": str(tmp_path / "workspace"),
        "DATABASE_URL": f"sqlite:///{tmp_path}/db.sqlite",
        "SANDBOX_IMAGE": os.environ.get("SANDBOX_IMAGE", "planact-sandbox:latest"),
    }
    read, write = os.pipe()
    os.set_inheritable(read, True)
    os.set_inheritable(write, True)
    try:
        done = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-c", SERVER, kind, str(ws)],
            env=env,
            cwd=Path(__file__).parents[2],
            pass_fds=(read, write),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        os.close(read)
        os.close(write)
    assert done.returncode == 0, done.stderr
    # listdir's own descriptor of /proc/self/fd is the one more
    assert "['0', '1', '2', '3']" in done.stdout, done.stdout


async def test_the_caps_are_the_settings(make_rt: RuntimeFactory, tmp_path: Path) -> None:
    rt: Any = make_rt(
        sandbox_memory_mb=192,
        sandbox_pids=64,
        sandbox_cpus=0.5,
        sandbox_tmp_mb=32,
        workspace_max_mb=50,
    )
    ws = conversation(tmp_path, 1)
    seen = await run(rt, ws, "ulimit -f; df -k --output=size /tmp | tail -1")
    fsize, tmp_kib = stdout_of(seen).split()
    assert int(fsize) == 50 * 1024  # KiB: no file past the workspace budget
    assert int(tmp_kib) == 32 * 1024
    if hasattr(rt, "sandboxes"):  # docker: the container's own limits
        from docker.client import DockerClient

        client = DockerClient.from_env(timeout=30)
        try:
            (sandbox,) = rt.sandboxes.by_key.values()
            host = client.containers.get(sandbox.container_id).attrs["HostConfig"]
        finally:
            client.close()
        assert (host["Memory"], host["MemorySwap"]) == (192 * MB, 192 * MB)
        assert (host["PidsLimit"], host["NanoCpus"]) == (64, 500_000_000)
    elif rt.cgroups is not None:  # bubblewrap in this conversation's control groups
        memory, pids, cpu = (base / rt.cgroups.key(ws) for base in rt.cgroups.bases.values())
        assert (memory / "memory.limit_in_bytes").read_text() == f"{192 * MB}\n"
        assert (pids / "pids.max").read_text() == "64\n"
        assert (cpu / "cpu.cfs_quota_us").read_text() == "50000\n"
    else:  # bubblewrap without control groups: memory per process
        data = await run(rt, ws, "ulimit -d")
        assert stdout_of(data) == f"{192 * 1024}\n"
