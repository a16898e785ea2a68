"""What a command of the local runtime under bubblewrap sees, may write and leaves behind."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from backend.runtime.bwrap import Bubblewrap
from backend.runtime.limits import MB, SandboxLimits
from backend.runtime.local import LocalRuntime
from tests.support.runtime import (
    eventually,
    host_count_marked,
    require_bwrap,
    run,
    sandboxed_alive,
    stdout_of,
    wait_for_file,
)

pytestmark = pytest.mark.bwrap


@pytest.fixture
def sandbox() -> Bubblewrap:
    return require_bwrap()


@pytest.fixture
def rt(sandbox: Bubblewrap) -> LocalRuntime:
    return LocalRuntime(terminal_timeout=20, sandbox=sandbox)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = tmp_path / "workspace" / "user_bob" / "Conversation_b"
    path.mkdir(parents=True)
    return path


@pytest.fixture
def listener() -> Iterator[int]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(4)
    yield sock.getsockname()[1]
    sock.close()


async def test_the_host_is_out_of_sight(rt: LocalRuntime, ws: Path, tmp_path: Path) -> None:
    alice = tmp_path / "workspace" / "user_alice" / "Conversation_a"
    alice.mkdir(parents=True)
    (alice / "hello.txt").write_text("alice-secret")
    (tmp_path / "planact.db").write_text("database-secret")
    probes = [
        "../../user_alice/Conversation_a/hello.txt",
        str(alice / "hello.txt"),
        str(tmp_path / "planact.db"),
        f"/proc/{os.getpid()}/environ",
        str(Path(__file__).resolve()),  # the repository
    ]
    result = await run(rt, ws, "; ".join(f"cat {p}" for p in probes) + "; ls /")
    out = result.content
    assert "alice-secret" not in out and "database-secret" not in out
    assert "sandboxed_alive" not in out  # this file's text
    assert out.count("No such file or directory") == len(probes)
    top = set(stdout_of(result).split())
    assert top <= {"bin", "dev", "etc", "lib", "lib32", "lib64", "libx32", "proc", "sbin"} | {
        "tmp",
        "usr",
        "workspace",
    }


async def test_files_other_users_may_not_read_stay_hidden_from_a_root_server(
    rt: LocalRuntime, ws: Path
) -> None:
    unreadable = [p for p in ("/etc/shadow", "/etc/gshadow") if os.path.exists(p)]
    if not unreadable:
        pytest.skip("no /etc/shadow here")
    result = await run(rt, ws, f"cat {unreadable[0]} | head -c 200; echo")
    if os.geteuid() == 0:  # the server could read it: the sandbox must not
        assert os.access(unreadable[0], os.R_OK)
    assert "root:" not in stdout_of(result)


async def test_kernel_settings_cannot_be_written_even_by_a_root_server(
    rt: LocalRuntime, ws: Path
) -> None:
    """Under a root server the command is root (mapped to the host's root) without
    capabilities; /proc/sys files check only the owner's write bit, so /proc is read-only."""
    result = await run(
        rt,
        ws,
        "for f in /proc/sys/kernel/core_pattern /proc/sys/vm/drop_caches /proc/self/comm; "
        "do test -w $f && echo writable $f; done; echo checked",
    )
    assert stdout_of(result) == "checked\n", result.content


async def test_the_environment_is_the_sandboxs_own(
    rt: LocalRuntime, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLANACT_SERVER_ONLY", "server-secret")
    result = await run(rt, ws, "env; pwd; id -u", cwd=".")
    out = stdout_of(result)
    assert "server-secret" not in out
    assert "HOME=/workspace" in out and "\n/workspace\n" in out
    (ws / "sub").mkdir()
    assert stdout_of(await run(rt, ws, "pwd", cwd="sub")) == "/workspace/sub\n"


async def test_only_the_workspace_and_a_private_tmp_are_writable(
    rt: LocalRuntime, ws: Path, tmp_path: Path
) -> None:
    marker = f"planact-private-{os.getpid()}"
    result = await run(
        rt,
        ws,
        f"touch /usr/x /etc/x 2>&1; echo in-ws > out.txt; echo t > /tmp/{marker}; "
        f"cat /tmp/{marker}",
    )
    assert result.content.count("Read-only file system") == 2, result.content
    assert (ws / "out.txt").read_text() == "in-ws\n"
    assert stdout_of(result).endswith("t\n")
    assert not Path(f"/tmp/{marker}").exists()  # not the host's /tmp
    again = await run(rt, ws, f"cat /tmp/{marker}")
    assert "No such file" in again.content  # nor shared between commands


async def test_no_network_unless_it_is_on(rt: LocalRuntime, ws: Path, listener: int) -> None:
    probe = f"(exec 3<>/dev/tcp/127.0.0.1/{listener}) && echo CONNECTED"
    assert "CONNECTED" not in (await run(rt, ws, probe)).content
    assert rt.sandbox is not None
    networked = LocalRuntime(sandbox=dataclasses.replace(rt.sandbox, network=True))
    assert stdout_of(await run(networked, ws, probe)) == "CONNECTED\n"


async def test_processes_of_other_commands_are_invisible(rt: LocalRuntime, ws: Path) -> None:
    marker = f"4242{os.getpid() % 1000:03d}"
    other = asyncio.create_task(run(rt, ws, f"echo $$ > other.pid; sleep {marker}"))
    await wait_for_file(ws / "other.pid")
    seen = await run(rt, ws, "for p in /proc/[0-9]*; do cat $p/cmdline; echo; done")
    assert marker not in seen.content
    assert sandboxed_alive(ws, int((ws / "other.pid").read_text()))  # the helper sees it
    other.cancel()
    with pytest.raises(asyncio.CancelledError):
        await other
    await eventually(
        lambda: _false(sandboxed_alive(ws, int((ws / "other.pid").read_text()))),
        what="the cancelled command's process to die",
    )


async def _false(value: bool) -> bool:
    return not value


async def test_killing_its_parents_frees_no_process(rt: LocalRuntime, ws: Path) -> None:
    """Unsandboxed, `kill -9 $PPID` kills the wrapper and lets what the command started
    escape; in the sandbox the parent is bwrap's init, which the command cannot kill."""
    marker = f"4343{os.getpid() % 1000:03d}"
    command = f"(setsid sleep {marker} &); kill -9 $PPID; kill -9 1; echo still here"
    result = await run(rt, ws, command)
    assert "still here" in result.content
    assert host_count_marked(marker) == 0


# a server stand-in: one sandboxed command that leaves escaped processes, never returns
SERVER = r"""
import asyncio, sys
from pathlib import Path
from backend.actions.model import Action
from backend.actions.registry import run_action
from backend.runtime.bwrap import Bubblewrap
from backend.runtime.local import LocalRuntime

m = sys.argv[2]
command = (
    f"setsid sh -c 'sleep {m}1 & echo $! > setsid.pid'; "
    f"(sh -c 'sleep {m}2 & echo $! > double.pid' &); sleep {m}3"
)
runtime = LocalRuntime(sandbox=Bubblewrap(sys.argv[3]))
asyncio.run(run_action(runtime, Action("terminal_run", {"command": command}), Path(sys.argv[1])))
"""


async def test_sandboxed_commands_die_with_a_crashed_server(ws: Path, sandbox: Bubblewrap) -> None:
    marker = f"4444{os.getpid() % 1000:03d}"
    server = await asyncio.create_subprocess_exec(
        sys.executable, "-c", SERVER, str(ws), marker, sandbox.path, cwd=Path(__file__).parents[2]
    )
    try:
        await wait_for_file(ws / "setsid.pid")
        await wait_for_file(ws / "double.pid")
        assert host_count_marked(marker) == 3
        os.kill(server.pid, signal.SIGKILL)  # no clean-up code of the server runs
        await server.wait()

        async def gone() -> bool:
            return host_count_marked(marker) == 0

        await eventually(gone, what="the sandboxed processes of a crashed server to die")
    finally:
        if server.returncode is None:
            server.kill()
            await server.wait()


def _reapers() -> list[int]:
    """This process's reaper children (the local runtime's wrappers)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                argv = fh.read()
        except (OSError, IndexError, ValueError):
            continue
        if ppid == os.getpid() and b"reaper.py" in argv:
            found.append(int(entry))
    return found


async def test_a_killed_wrapper_takes_the_whole_sandbox_with_it(rt: LocalRuntime, ws: Path) -> None:
    """--die-with-parent: bwrap dies with the wrapper, and the PID namespace with bwrap.
    (Unsandboxed, what the command started outlives a SIGKILLed wrapper.)"""
    marker = f"4545{os.getpid() % 1000:03d}"
    command = f"setsid sleep {marker}1 & (sleep {marker}2 &); echo go > go.txt; sleep {marker}3"
    task = asyncio.create_task(run(rt, ws, command))
    await wait_for_file(ws / "go.txt")
    [reaper] = _reapers()
    assert host_count_marked(marker) == 3
    os.kill(reaper, signal.SIGKILL)
    result = await task
    assert result.status == "failure"

    async def gone() -> bool:
        return host_count_marked(marker) == 0

    await eventually(gone, what="the sandbox's processes to die with its wrapper")


async def test_without_control_groups_memory_is_capped_per_process(
    sandbox: Bubblewrap, ws: Path
) -> None:
    # a host whose cgroups the server cannot make: the rlimit fallback (docs/security.md)
    limits = SandboxLimits(memory=192 * MB, tmp=16 * MB)
    rt = LocalRuntime(
        terminal_timeout=20,
        sandbox=dataclasses.replace(sandbox, tmp_size=limits.tmp),
        limits=limits,
        cgroups=None,
    )
    hog = await run(rt, ws, "python3 -c \"b = b'x' * (600 * 1024 * 1024); print('survived')\"")
    assert hog.status == "failure"
    assert "MemoryError" in hog.content and "survived" not in hog.content
    seen = await run(rt, ws, "ulimit -d; nice; head -c 100M /dev/zero > /tmp/f; stat -c %s /tmp/f")
    data, niceness, *rest = stdout_of(seen).split()
    # KiB; the sandbox yields the CPU: 10 steps nicer than the server (at most 19)
    assert (int(data), int(niceness)) == (192 * 1024, min(19, os.nice(0) + 10))
    assert int(rest[-1]) <= 16 * MB
    assert "No space left on device" in seen.content
