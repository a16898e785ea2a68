"""The composer starts from the server's default runtime (docs/api.md, GET /api/settings
`runtime`), in Chromium against a server configured like the Compose app (RUNTIME=docker):
what the UI posts to /api/agent/run is the sandboxed runtime, never the first one listed."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from backend.runtime.registry import builtin_runtimes
from tests.e2e.server import Server, server_env, wait_for
from tests.fakellm import FakeModelServer
from tests.support.browser import DIST
from tests.support.runtime import require_bwrap
from tests.support.ui import send_goal

NewPage = Callable[..., Page]


@pytest.fixture
def compose_like(tmp_path: Path, fake_model: FakeModelServer) -> Iterator[Callable[..., Server]]:
    """Factory: a server with RUNTIME=docker and the given LOCAL_SANDBOX."""
    servers: list[Server] = []

    def start(local_sandbox: str) -> Server:
        env = server_env(
            tmp_path,
            fake_model.base_url,
            FRONTEND_DIST=str(DIST),
            RUNTIME="docker",
            LOCAL_SANDBOX=local_sandbox,
        )
        servers.append(Server(tmp_path, env).start())
        return servers[-1]

    yield start
    for s in servers:
        s.stop()


def posted_runs(page: Page) -> list[dict[str, Any]]:
    bodies: list[dict[str, Any]] = []

    def seen(request: Any) -> None:
        if request.method == "POST" and request.url.endswith("/api/agent/run"):
            bodies.append(json.loads(request.post_data or "{}"))

    page.on("request", seen)
    return bodies


def test_the_compose_app_offers_docker_alone_and_the_ui_posts_it(
    compose_like: Callable[..., Server], fake_model: FakeModelServer, new_page: NewPage
) -> None:
    # the app container has no working bubblewrap: its local runtime would be unsandboxed
    server = compose_like("off")
    fake_model.model.auto = True
    page = new_page()
    bodies = posted_runs(page)
    page.goto(server.url)
    expect(page.get_by_test_id("mode")).to_be_visible()
    expect(page.get_by_test_id("runtime")).to_have_count(0)  # nothing to choose
    send_goal(page, "say hello", mode="chat")
    wait_for(lambda: bodies, what="the run's POST")
    assert [b.get("runtime") for b in bodies] == ["docker"]


def test_the_composer_starts_from_the_default_runtime_when_several_are_offered(
    compose_like: Callable[..., Server], fake_model: FakeModelServer, new_page: NewPage
) -> None:
    require_bwrap()  # the local runtime sandboxed: offered beside docker
    server = compose_like("bwrap")
    fake_model.model.auto = True
    for width in (1280, 390):
        page = new_page(width=width)
        bodies = posted_runs(page)
        page.goto(server.url)
        picker = page.get_by_test_id("runtime")
        expect(picker).to_be_visible()
        assert picker.locator("option").all_inner_texts() == builtin_runtimes().names()
        expect(picker).to_have_value("docker")
        send_goal(page, f"say hello at {width}", mode="chat")
        wait_for(lambda b=bodies: b, what="the run's POST")
        assert [b.get("runtime") for b in bodies] == ["docker"]
