"""Browser tests: the built UI (frontend/dist) served by the real `planact serve`, driven in
the system Chromium by Playwright, against the fake model server.

They skip when /usr/bin/chromium (or the built UI) is missing, unless REQUIRE_BROWSER=1,
in which case they fail. Playwright never downloads a browser here."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.server import Server, server_env
from tests.fakellm import FakeModelServer
from tests.support.browser import ARTIFACTS, CHROMIUM, DIST, launched_chromium


def _missing() -> str | None:
    if not CHROMIUM.exists():
        return f"{CHROMIUM} is missing (apt-get install -y chromium)"
    if not (DIST / "index.html").is_file():
        return "frontend/dist is not built (make frontend)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    ui_items = [i for i in items if i.path.is_relative_to(here)]
    for item in ui_items:
        item.add_marker(pytest.mark.browser)
        item.add_marker(pytest.mark.e2e)
    reason = _missing()
    if reason is None or not ui_items or os.environ.get("REQUIRE_BROWSER") == "1":
        return  # with REQUIRE_BROWSER=1 the `browser` fixture fails instead
    for item in ui_items:
        item.add_marker(pytest.mark.skip(reason=reason))


# one browser per module: Playwright's sync API keeps its event loop set as running while it
# is open, so async tests collected after the UI tests (tests/waits) could not start theirs
@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    reason = _missing()
    if reason is None:
        from playwright.sync_api import expect

        expect.set_options(timeout=20_000)
    yield from launched_chromium(reason)


@pytest.fixture
def ui_server(tmp_path: Path, fake_model: FakeModelServer) -> Iterator[Server]:
    env = server_env(tmp_path, fake_model.base_url, FRONTEND_DIST=str(DIST))
    server = Server(tmp_path, env).start()
    try:
        yield server
    finally:
        server.stop()


class PageErrors(list[str]):
    pass


@pytest.fixture
def page_errors() -> PageErrors:
    return PageErrors()


@pytest.fixture
def new_page(
    browser: Any, request: pytest.FixtureRequest, page_errors: PageErrors
) -> Iterator[Any]:
    """Factory: new_page(width=1280, height=860) -> a Playwright Page in a fresh context.
    Each page is screenshotted into test-artifacts/ at teardown; uncaught page errors fail
    the test."""
    contexts: list[Any] = []
    pages: list[Any] = []

    def make(width: int = 1280, height: int = 860, **ctx: Any) -> Any:
        context = browser.new_context(
            viewport={"width": width, "height": height}, accept_downloads=True, **ctx
        )
        context.set_default_timeout(20_000)
        contexts.append(context)
        page = context.new_page()
        page.on("pageerror", lambda e: page_errors.append(str(e)))
        pages.append(page)
        return page

    yield make
    ARTIFACTS.mkdir(exist_ok=True)
    name = re.sub(r"[^\w.-]+", "_", request.node.name)
    for i, page in enumerate(pages):
        suffix = f"-{i}" if i else ""
        with contextlib.suppress(Exception):  # a closed page has nothing to show
            page.screenshot(path=str(ARTIFACTS / f"ui-{name}{suffix}.png"), full_page=True)
    for context in contexts:
        context.close()
    assert not page_errors, f"uncaught errors in the page: {page_errors}"
