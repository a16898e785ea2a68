"""Previews end to end: the real `planact serve` (its preview listener), a scripted model over
real HTTP, services in bubblewrap or docker, the page in Chromium."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.agent.scripts import finish, plan_reply, write
from tests.e2e.server import Server, free_port, server_env
from tests.fakellm import FakeModelServer
from tests.runtime.conftest import require_bwrap, require_docker

APP = (Path(__file__).with_name("sample_app.py")).read_text()
RUNTIMES = [
    pytest.param("local-bwrap", marks=pytest.mark.bwrap),
    pytest.param("docker", marks=pytest.mark.docker),
]


def preview_tag(port: int, command: str = "", **extra: str) -> str:
    parts = [f"<port>{port}</port>"]
    if command:
        parts.append(f"<command>{command}</command>")
    parts += [f"<{k}>{v}</{k}>" for k, v in extra.items()]
    return f"<preview>{''.join(parts)}</preview>"


def app_script(model: FakeModelServer, *thinking: str, summary: str = "Previewed the app.") -> None:
    """The scripted model: a plan, the given thinking replies (the last one finishes)."""
    steps: list[dict[str, object]] = [
        {"stage": "route", "content": '{"task_type": "code_generation", "needs_tools": true}'},
        {"stage": "planning", "content": plan_reply("Build and preview the app")},
    ]
    steps += [{"stage": "thinking", "content": t} for t in thinking]
    steps.append({"stage": "summary", "content": summary})
    model.script(*steps)


def write_app() -> str:
    return write("app.py", APP)


def done(message: str = "previewed") -> str:
    return finish(message)


@dataclass
class PreviewServer:
    server: Server
    preview_port: int
    runtime: str

    @property
    def preview_base(self) -> str:
        return f"http://127.0.0.1:{self.preview_port}"


def runtime_env(runtime: str) -> dict[str, str]:
    if runtime == "docker":
        require_docker()
        return {
            "RUNTIME": "docker",
            "SANDBOX_IMAGE": os.environ.get("SANDBOX_IMAGE", "planact-sandbox:latest"),
        }
    require_bwrap()
    return {"RUNTIME": "local", "LOCAL_SANDBOX": "bwrap"}


@pytest.fixture(params=RUNTIMES)
def preview_server(
    request: pytest.FixtureRequest, tmp_path: Path, fake_model: FakeModelServer
) -> Iterator[PreviewServer]:
    yield from start_preview_server(request.param, tmp_path, fake_model)


def start_preview_server(
    runtime: str, tmp_path: Path, fake_model: FakeModelServer, **extra: str
) -> Iterator[PreviewServer]:
    preview_port = free_port()
    env = server_env(
        tmp_path,
        fake_model.base_url,
        PREVIEW_URL=f"http://127.0.0.1:{preview_port}",
        PREVIEW_SOCKET_DIR=str(tmp_path / "pv"),
        PREVIEW_START_TIMEOUT="30",
        **runtime_env(runtime),
        **extra,
    )
    server = Server(tmp_path, env).start()
    try:
        yield PreviewServer(server, preview_port, runtime)
    finally:
        server.stop()
