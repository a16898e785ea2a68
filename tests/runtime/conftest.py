"""Runtime fixtures: one ``runtime`` parametrized over local (unsandboxed), local under
bubblewrap and docker.

Docker tests skip when no engine answers or the sandbox image is missing, unless
``REQUIRE_DOCKER=1``: then they fail (CI sets it after starting an engine and building the
image). Bubblewrap tests skip when ``bwrap`` is missing or does not work, unless
``REQUIRE_BWRAP=1`` (scripts/ci.d/15-bubblewrap.sh). Waiting is polling a condition with a
deadline, never a bare sleep.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from backend.runtime import make_runtime
from backend.runtime.base import BaseRuntime
from backend.runtime.limits import SandboxLimits
from backend.runtime.local import LocalRuntime
from backend.runtime.registry import builtin_runtimes
from backend.runtime.sandboxing import sandbox_cgroups
from tests.support.runtime import RuntimeFactory, require_bwrap, require_docker, runtime_settings

# How the contract suite runs each runtime of the registry (backend/runtime/registry.py): a
# runtime named here runs in each of its variants, any other one as ``make_runtime`` makes it.
VARIANTS: dict[str, list[Any]] = {
    "local": ["local", pytest.param("local-bwrap", marks=pytest.mark.bwrap)],
    "docker": [
        pytest.param("docker", marks=pytest.mark.docker),
        # the docker runtime without its command runner: one `docker exec` per command
        pytest.param("docker-exec", marks=pytest.mark.docker),
    ],
}
RUNTIMES = [v for name in builtin_runtimes().names() for v in VARIANTS.get(name, [name])]


@pytest.fixture(params=RUNTIMES)
async def make_rt(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[RuntimeFactory]:
    """Build runtimes of the parametrized kind (settings overridable); all closed at the end."""
    kind: str = request.param
    if kind.startswith("docker"):
        require_docker()
    sandbox = require_bwrap() if kind == "local-bwrap" else None
    made: list[BaseRuntime] = []

    def factory(**overrides: Any) -> BaseRuntime:
        settings = runtime_settings(tmp_path, **overrides)
        rt: BaseRuntime
        if sandbox is not None:
            network = settings.sandbox_network == "bridge"
            limits = SandboxLimits.from_settings(settings)
            rt = LocalRuntime(
                terminal_timeout=settings.terminal_timeout,
                workspace_max_mb=settings.workspace_max_mb,
                sandbox=dataclasses.replace(sandbox, network=network, tmp_size=limits.tmp),
                limits=limits,
                cgroups=sandbox_cgroups(limits),
            )
        elif kind == "docker-exec":
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
