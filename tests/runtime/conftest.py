"""Runtime fixtures: one ``runtime`` parametrized over local and docker.

Docker tests skip when no engine answers or the sandbox image is missing, unless
``REQUIRE_DOCKER=1``: then they fail (CI sets it after starting an engine and building the
image). Waiting is polling a condition with a deadline, never a bare sleep.
"""

from __future__ import annotations

import asyncio
import functools
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from backend.actions.model import Action
from backend.config import Settings
from backend.runtime import make_runtime
from backend.runtime.base import ActionResult, BaseRuntime
from tests.conftest import make_settings

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


RUNTIMES = [
    "local",
    pytest.param("docker", marks=pytest.mark.docker),
    # the docker runtime without its command runner: one `docker exec` per command
    pytest.param("docker-exec", marks=pytest.mark.docker),
]


@pytest.fixture(params=RUNTIMES)
async def make_rt(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[RuntimeFactory]:
    """Build runtimes of the parametrized kind (settings overridable); all closed at the end."""
    kind: str = request.param
    if kind.startswith("docker"):
        require_docker()
    made: list[BaseRuntime] = []

    def factory(**overrides: Any) -> BaseRuntime:
        settings = runtime_settings(tmp_path, **overrides)
        rt: BaseRuntime
        if kind == "docker-exec":
            from backend.runtime.docker import DockerRuntime

            rt = DockerRuntime(settings, runner=False)
        else:
            rt = make_runtime(settings, kind)  # type: ignore[assignment]
        made.append(rt)
        return rt

    yield factory
    for rt in made:
        await rt.close()


@pytest.fixture
def runtime(make_rt: RuntimeFactory) -> BaseRuntime:
    return make_rt()


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "workspace" / "user_1" / "Conversation_1"
    ws.mkdir(parents=True)
    return ws


@pytest.fixture
def docker_client() -> Iterator[Any]:
    require_docker()
    from docker.client import DockerClient

    client = DockerClient.from_env(timeout=30)
    yield client
    client.close()


async def run(rt: BaseRuntime, ws: Path, command: str, cwd: str | None = None) -> ActionResult:
    params = {"command": command}
    if cwd is not None:
        params["cwd"] = cwd
    return await rt.execute(Action("terminal_run", params), ws)


async def write(rt: BaseRuntime, ws: Path, path: str, content: str) -> ActionResult:
    return await rt.execute(Action("write_code", {"path": path, "content": content}), ws)


async def read(rt: BaseRuntime, ws: Path, path: str) -> ActionResult:
    return await rt.execute(Action("read_file", {"path": path}), ws)


def stdout_of(result: ActionResult) -> str:
    """The stdout section of a terminal_run result."""
    text = result.content
    start = text.index("stdout:") + len("stdout:")
    end = text.rindex("\nstderr:")
    body = text[start:end]
    return "" if body.strip() == "(empty)" else body.removeprefix("\n")


async def eventually(
    check: Callable[[], Awaitable[bool]], within: float = 15.0, what: str = "condition"
) -> None:
    """Poll ``check`` until it holds; fail after ``within`` seconds."""
    deadline = time.monotonic() + within
    while True:
        if await check():
            return
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {within}s waiting for {what}")
        await asyncio.sleep(0.05)


async def wait_for_file(path: Path, within: float = 15.0) -> None:
    async def exists() -> bool:
        return path.exists() and path.stat().st_size > 0

    await eventually(exists, within, f"{path} to appear")


# A process is gone when /proc has no entry for it or it is a zombie waiting to be reaped.
ALIVE = (
    'p=$(cat {pidfile}); if [ -e /proc/$p ] && ! grep -q "^State:.*Z" /proc/$p/status; '
    "then echo alive; else echo gone; fi"
)


async def process_gone(rt: BaseRuntime, ws: Path, pidfile: str) -> bool:
    result = await run(rt, ws, ALIVE.format(pidfile=pidfile))
    return stdout_of(result).strip() == "gone"
