"""LOCAL_SANDBOX decided at start, and the refusal of a shared unsandboxed local runtime."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from backend.app import create_app
from backend.config import Settings
from backend.runtime.bwrap import Bubblewrap
from backend.runtime.local import LocalRuntime
from backend.runtime.sandboxing import (
    SandboxConfigError,
    local_runtime_for_process,
    local_sandbox,
)
from tests.support.runtime import require_bwrap
from tests.support.settings import make_settings

TWO_USERS = "alice:tok-a,bob:tok-b"


def nothing(_name: str) -> str | None:
    return None


def broken_bwrap(tmp_path: Path) -> str:
    """A bwrap that fails as one does where user namespaces are not allowed."""
    path = tmp_path / "bwrap"
    path.write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
    path.chmod(0o755)
    return str(path)


def test_off_is_unsandboxed_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        assert local_sandbox(make_settings(tmp_path, local_sandbox="off")) is None
    assert "LOCAL_SANDBOX=off" in caplog.text
    assert "unsandboxed" in caplog.text


def test_auto_without_bubblewrap_says_how_to_install_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        assert local_sandbox(make_settings(tmp_path), which=nothing) is None
    [record] = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert "not installed" in record.getMessage()
    assert "apt-get install bubblewrap" in record.getMessage()


def test_with_docker_as_the_default_a_missing_bubblewrap_is_no_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO):
        assert local_sandbox(make_settings(tmp_path, runtime="docker"), which=nothing) is None
    assert "apt-get install bubblewrap" in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_auto_with_a_bubblewrap_that_fails_runs_unsandboxed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    bwrap = broken_bwrap(tmp_path)
    with caplog.at_level(logging.WARNING):
        assert local_sandbox(make_settings(tmp_path), which=lambda _n: bwrap) is None
    assert "uid map: Permission denied" in caplog.text


def test_bwrap_mode_refuses_to_start_without_a_working_bubblewrap(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, local_sandbox="bwrap")
    with pytest.raises(SandboxConfigError, match=r"not installed.*apt-get install bubblewrap"):
        local_sandbox(settings, which=nothing)
    bwrap = broken_bwrap(tmp_path)
    with pytest.raises(SandboxConfigError, match="uid map: Permission denied"):
        local_sandbox(settings, which=lambda _n: bwrap)


def test_auto_uses_a_working_bubblewrap(tmp_path: Path) -> None:
    require_bwrap()
    found = local_sandbox(make_settings(tmp_path))
    assert isinstance(found, Bubblewrap) and not found.network
    networked = local_sandbox(make_settings(tmp_path, sandbox_network="bridge"))
    assert networked is not None and networked.network


@pytest.mark.parametrize(
    ("value", "meaning"),
    [("1", "bridge"), ("on", "bridge"), ("bridge", "bridge"), ("0", "none"), ("none", "none")],
)
def test_sandbox_network_has_one_meaning_for_both_sandboxes(
    monkeypatch: pytest.MonkeyPatch, value: str, meaning: str
) -> None:
    monkeypatch.setenv("SANDBOX_NETWORK", value)
    assert Settings(_env_file=None).sandbox_network == meaning


def test_two_users_on_an_unsandboxed_local_runtime_are_refused(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, auth_tokens=TWO_USERS, local_sandbox="off")
    with pytest.raises(SandboxConfigError) as caught:
        local_runtime_for_process(settings)
    message = str(caught.value)
    assert "RUNTIME=docker" in message and "bubblewrap" in message
    assert "ALLOW_SHARED_LOCAL=1" in message
    # the same through create_app, which every `planact serve` goes through
    with pytest.raises(SandboxConfigError):
        create_app(settings)


def test_the_refusal_has_its_ways_out(tmp_path: Path) -> None:
    allowed = make_settings(
        tmp_path, auth_tokens=TWO_USERS, local_sandbox="off", allow_shared_local=True
    )
    assert local_runtime_for_process(allowed).offered
    one_user = make_settings(tmp_path, auth_token="tok", local_sandbox="off")
    assert local_runtime_for_process(one_user).offered
    # `planact run` serves nobody: the operator's own run
    cli = make_settings(tmp_path, auth_tokens=TWO_USERS, local_sandbox="off")
    assert local_runtime_for_process(cli, serving=False).sandbox is None


def test_two_users_sandboxed_start(tmp_path: Path) -> None:
    require_bwrap()
    settings = make_settings(tmp_path, auth_tokens=TWO_USERS)
    runtime = local_runtime_for_process(settings)
    assert isinstance(runtime, LocalRuntime)
    assert runtime.sandbox is not None and runtime.offered


def test_docker_default_with_two_users_does_not_offer_the_unsandboxed_local_runtime(
    tmp_path: Path,
) -> None:
    settings = make_settings(tmp_path, auth_tokens=TWO_USERS, local_sandbox="off", runtime="docker")
    app = create_app(settings)
    assert app.state.runtimes_available == ["docker"]
    with TestClient(app) as client:
        resp = client.post(
            "/api/agent/run",
            json={"goal": "hi", "runtime": "local"},
            headers={"Authorization": "Bearer tok-b", "Accept": "application/json"},
        )
    assert resp.status_code == 400
    assert "local runtime is not available" in resp.json()["error"]["message"]
    assert "no sandbox" in resp.json()["error"]["message"]
