"""Which runtimes a run may pick (docs/api.md, GET /api/settings): the settings name the
default one, an unsandboxed runtime is never offered beside a sandboxed default unless
RUNTIMES says so, and a run naming a runtime not offered is a 400 that says why."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from backend.app import create_app
from backend.llm.testing import ScriptedLLM
from backend.runtime.registry import builtin_runtimes
from backend.runtime.sandboxing import SandboxConfigError
from tests.support.runtime import require_bwrap
from tests.support.settings import make_settings


def client(tmp_path: Path, **overrides: Any) -> Iterator[TestClient]:
    app = create_app(make_settings(tmp_path, **overrides), llm=ScriptedLLM([]))
    with TestClient(app) as c:
        yield c


def refused(c: TestClient, runtime: str) -> str:
    body = {"goal": "hi", "runtime": runtime}
    resp = c.post("/api/agent/run", json=body, headers={"Accept": "application/json"})
    assert resp.status_code == 400, resp.text
    assert c.get("/api/conversations").json() == []  # nothing created
    message: str = resp.json()["error"]["message"]
    return message


def test_the_settings_name_the_default_runtime(tmp_path: Path) -> None:
    for c in client(tmp_path, local_sandbox="off"):
        body = c.get("/api/settings").json()
        assert body["runtime"] == "local"
        assert body["runtimes"][0] == "local"


def test_a_docker_default_does_not_offer_the_unsandboxed_local_runtime(tmp_path: Path) -> None:
    # the Compose app: RUNTIME=docker, no bubblewrap in the container
    for c in client(tmp_path, runtime="docker", local_sandbox="off"):
        body = c.get("/api/settings").json()
        assert body["runtime"] == "docker"
        assert body["runtimes"] == ["docker"]
        message = refused(c, "local")
        assert message.startswith("The local runtime is not available on this server")
        assert "unsandboxed" in message and "RUNTIMES=docker,local" in message


def test_runtimes_offers_the_unsandboxed_one_when_the_operator_says_so(tmp_path: Path) -> None:
    for c in client(tmp_path, runtime="docker", local_sandbox="off", runtimes="docker, local"):
        offered = c.get("/api/settings").json()["runtimes"]
        assert offered == [
            name for name in builtin_runtimes().names() if name in ("docker", "local")
        ]


def test_a_sandboxed_local_runtime_is_offered_beside_docker(tmp_path: Path) -> None:
    require_bwrap()
    for c in client(tmp_path, runtime="docker", local_sandbox="bwrap"):
        body = c.get("/api/settings").json()
        assert body["runtime"] == "docker" and body["runtimes"] == builtin_runtimes().names()


def test_runtimes_limits_what_a_run_may_pick(tmp_path: Path) -> None:
    for c in client(tmp_path, local_sandbox="off", runtimes="local"):
        assert c.get("/api/settings").json()["runtimes"] == ["local"]
        message = refused(c, "docker")
        assert message == (
            "The docker runtime is not available on this server: RUNTIMES lists only local."
        )


@pytest.mark.parametrize(
    ("overrides", "words"),
    [
        ({"runtimes": "docker"}, "RUNTIMES='docker' leaves out RUNTIME='local'"),
        ({"runtimes": "local,podman"}, "RUNTIMES names 'podman', not a runtime"),
    ],
)
def test_a_bad_runtimes_setting_stops_start_up_with_a_message(
    tmp_path: Path, overrides: dict[str, str], words: str
) -> None:
    with pytest.raises(SandboxConfigError, match=words):
        create_app(make_settings(tmp_path, local_sandbox="off", **overrides), llm=ScriptedLLM([]))
