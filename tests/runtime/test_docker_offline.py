"""Docker runtime behaviour that needs no engine."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import requests

import docker
from backend.runtime.base import RuntimeUnavailable
from backend.runtime.docker import DockerRuntime
from backend.runtime.docker.engine import is_gone
from backend.runtime.docker.ownership import host_path
from tests.support.runtime import read, run, runtime_settings, write


async def test_no_engine_is_a_failure_result_not_an_exception(tmp_path: Path) -> None:
    rt = DockerRuntime(runtime_settings(tmp_path), base_url="unix:///nonexistent/docker.sock")
    ws = tmp_path / "workspace" / "c"
    try:
        await rt.start()  # logs, does not raise: the server must still start
        assert await rt.available() is False
        result = await run(rt, ws, "true")
        assert result.status == "failure"
        assert "no Docker engine answers at unix:///nonexistent/docker.sock" in result.content
        assert "RUNTIME=local" in result.content
        # file actions are host-side and keep working
        assert (await write(rt, ws, "a.txt", "a")).ok
        assert (await read(rt, ws, "a.txt")).content == "a"
        await rt.forget(ws)
    finally:
        await rt.close()


def test_host_workspace_mapping(tmp_path: Path) -> None:
    mapped = runtime_settings(tmp_path, sandbox_host_workspace_dir=Path("/srv/planact/workspace"))
    root = os.path.realpath(tmp_path / "workspace")
    ws = root + "/user_1/Conversation_7"
    assert host_path(mapped, root, ws) == "/srv/planact/workspace/user_1/Conversation_7"
    with pytest.raises(RuntimeUnavailable, match="outside WORKSPACE_DIR"):
        host_path(mapped, root, "/somewhere/else")
    assert host_path(runtime_settings(tmp_path), root, ws) == ws


def engine_error(status: int, explanation: str) -> docker.errors.APIError:
    response = requests.Response()
    response.status_code = status
    if status == 404:
        return docker.errors.NotFound("engine", response=response, explanation=explanation)
    return docker.errors.APIError("engine", response=response, explanation=explanation)


@pytest.mark.parametrize(
    ("status", "explanation", "gone"),
    [
        (404, "No such container: abc", True),
        (409, "Container abc is not running", True),
        # what the engine answered in CI when the sandbox died (OOM) between creating an
        # exec and starting it: the command never ran, so a fresh sandbox may run it
        (500, "Container abc is not running: Exited (137) Less than a second ago", True),
        (500, "OCI runtime exec failed: unable to start container process", False),
        (400, "bad parameter", False),
    ],
)
def test_which_engine_errors_mean_the_sandbox_is_gone(
    status: int, explanation: str, gone: bool
) -> None:
    assert is_gone(engine_error(status, explanation)) is gone
