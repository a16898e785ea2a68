"""Runtimes under test: what a host must have (Docker, bubblewrap), settings, one action run,
what is left running afterwards."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import os
import shutil
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from backend.actions.model import Action
from backend.actions.registry import run_action
from backend.config import Settings
from backend.runtime.base import ActionResult, BaseRuntime
from backend.runtime.bwrap import Bubblewrap
from backend.runtime.registry import builtin_runtimes
from tests.support.settings import make_settings

SANDBOX_IMAGE = os.environ.get("SANDBOX_IMAGE", "planact-sandbox:latest")


@functools.cache
def _docker_problem() -> str | None:
    """Why docker tests cannot run here, or None."""
    from docker.client import DockerClient
    from docker.errors import DockerException, ImageNotFound

    from backend.runtime.docker.engine import MIN_API_VERSION, probe_unix_socket

    try:
        probe_unix_socket(os.environ.get("DOCKER_HOST"))
        client = DockerClient.from_env(version=MIN_API_VERSION, timeout=10)
    except Exception as exc:
        return f"no Docker engine answers: {exc}"
    try:
        client.ping()
        client.images.get(SANDBOX_IMAGE)
    except ImageNotFound:
        return f"sandbox image {SANDBOX_IMAGE} missing (make sandbox-image)"
    except (DockerException, OSError) as exc:
        return f"no Docker engine answers: {exc}"
    finally:
        client.close()
    return None


def require_docker() -> None:
    problem = _docker_problem()
    if problem is None:
        return
    if os.environ.get("REQUIRE_DOCKER") == "1":
        pytest.fail(f"REQUIRE_DOCKER=1 but {problem}")
    pytest.skip(problem)


@functools.cache
def _bwrap() -> Bubblewrap | str:
    """A working bubblewrap sandbox, or why there is none."""
    path = shutil.which("bwrap")
    if path is None:
        return "bubblewrap is not installed (apt-get install bubblewrap)"
    sandbox = Bubblewrap(path)
    problem = sandbox.probe()
    return sandbox if problem is None else f"bubblewrap does not work here: {problem}"


def require_bwrap(network: bool = False) -> Bubblewrap:
    found = _bwrap()
    if isinstance(found, str):
        if os.environ.get("REQUIRE_BWRAP") == "1":
            pytest.fail(f"REQUIRE_BWRAP=1 but {found}")
        pytest.skip(found)
    return dataclasses.replace(found, network=network)


# the pytest marks of a runtime's tests (the ones that need an engine)
MARKS: dict[str, Any] = {"docker": pytest.mark.docker}


def each_runtime() -> list[Any]:
    """Every runtime of the registry as a test parameter, with its marks."""
    return [pytest.param(name, marks=MARKS.get(name, ())) for name in builtin_runtimes().names()]


def runtime_settings(tmp_path: Path, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "terminal_timeout": 20,
        "sandbox_image": SANDBOX_IMAGE,
        "sandbox_memory": "512m",
        "sandbox_pids": 128,
        "sandbox_uid": None,
        "sandbox_gid": None,
        "sandbox_host_workspace_dir": None,
        "sandbox_network": "none",
    }
    values.update(overrides)
    return make_settings(tmp_path, **values)


RuntimeFactory = Callable[..., BaseRuntime]


async def run(rt: BaseRuntime, ws: Path, command: str, cwd: str | None = None) -> ActionResult:
    params = {"command": command}
    if cwd is not None:
        params["cwd"] = cwd
    return await run_action(rt, Action("terminal_run", params), ws)


async def write(rt: BaseRuntime, ws: Path, path: str, content: str) -> ActionResult:
    return await run_action(rt, Action("write_code", {"path": path, "content": content}), ws)


async def read(rt: BaseRuntime, ws: Path, path: str) -> ActionResult:
    return await run_action(rt, Action("read_file", {"path": path}), ws)


def stdout_of(result: ActionResult) -> str:
    """The stdout section of a terminal_run result."""
    text = result.content
    start = text.index("stdout:") + len("stdout:")
    end = text.rindex("\nstderr:")
    body = text[start:end]
    return "" if body.strip() == "(empty)" else body.removeprefix("\n")


async def eventually(
    check: Callable[[], Awaitable[bool]], within: float = 60.0, what: str = "condition"
) -> None:
    """Poll ``check`` until it holds; fail after ``within`` seconds."""
    deadline = time.monotonic() + within
    while True:
        if await check():
            return
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {within}s waiting for {what}")
        await asyncio.sleep(0.05)


async def wait_for_file(path: Path, within: float = 60.0) -> None:
    async def exists() -> bool:
        return path.exists() and path.stat().st_size > 0

    await eventually(exists, within, f"{path} to appear")


# A process is gone when /proc has no entry for it or it is a zombie waiting to be reaped.
ALIVE = (
    'p=$(cat {pidfile}); if [ -e /proc/$p ] && ! grep -q "^State:.*Z" /proc/$p/status; '
    "then echo alive; else echo gone; fi"
)


async def process_gone(rt: BaseRuntime, ws: Path, pidfile: str) -> bool:
    if getattr(rt, "sandbox", None) is not None:
        # each sandboxed command has a PID namespace of its own: look from the host
        return not sandboxed_alive(ws, int((ws / pidfile).read_text()))
    result = await run(rt, ws, ALIVE.format(pidfile=pidfile))
    return stdout_of(result).strip() == "gone"


def _host_processes() -> Iterator[tuple[int, str]]:
    """(pid, /proc/pid/status text) of every live host process."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as fh:
                status = fh.read()
        except OSError:
            continue
        if "\nState:\tZ" not in status:
            yield int(entry), status


def sandboxed_alive(ws: Path, ns_pid: int) -> bool:
    """Whether a live host process is ``ns_pid`` in a sandbox that mounts ``ws``."""
    for pid, status in _host_processes():
        nspids = next((ln.split()[1:] for ln in status.splitlines() if ln.startswith("NSpid:")), [])
        if len(nspids) < 2 or nspids[-1] != str(ns_pid):
            continue
        if _mounts_workspace(pid, ws):
            return True
    return False


def _mounts_workspace(pid: int, ws: Path) -> bool:
    """Whether ``pid`` sees ``ws`` mounted at /workspace (mountinfo's root field is the
    path inside the source file system: a suffix of the host path)."""
    try:
        with open(f"/proc/{pid}/mountinfo") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return False
    for line in lines:
        fields = line.split()
        if len(fields) > 4 and fields[4] == "/workspace" and str(ws).endswith(fields[3]):
            return fields[3].count("/") >= 3
    return False


def host_count_marked(marker: str) -> int:
    """Host processes running ``sleep <marker…>`` (the commands that started them and
    the test's own processes do not count)."""
    count = 0
    for pid, _status in _host_processes():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                argv = fh.read().split(b"\0")
        except OSError:
            continue
        if len(argv) > 1 and argv[0].endswith(b"sleep") and argv[1].startswith(marker.encode()):
            count += 1
    return count
