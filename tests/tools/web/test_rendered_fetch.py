"""web_fetch with headless Chromium (Playwright, /usr/bin/chromium or CHROMIUM_PATH)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from backend.tools.web import FetchConfig, WebFetch
from backend.tools.web.render import available
from tests.tools.web.site import Site

CHROMIUM = os.environ.get("CHROMIUM_PATH") or "/usr/bin/chromium"
MISSING = available(CHROMIUM)

needs_chromium = pytest.mark.skipif(
    MISSING is not None and os.environ.get("REQUIRE_BROWSER") != "1",
    reason=f"rendering unavailable: {MISSING}",
)


@pytest.fixture
def victim() -> Iterator[Site]:
    """A loopback site nobody allowed: a rendered page's requests to it must never arrive."""
    server = Site().start()
    yield server
    server.stop()


def fetcher(site: Site, render: str, chromium: str = CHROMIUM) -> WebFetch:
    return WebFetch(
        FetchConfig(
            render=render,
            timeout=60.0,
            allow_hosts=frozenset({f"127.0.0.1:{site.port}"}),
            chromium_path=chromium,
        )
    )


@pytest.mark.browser
@needs_chromium
async def test_auto_renders_a_page_built_by_scripts_with_a_screenshot(
    site: Site, victim: Site, tmp_path: Path
) -> None:
    site.spa_fetch = f"{victim.url}/steal"
    workspace = tmp_path / "workspace"
    result = await fetcher(site, "auto")(site.url + "/spa", screenshot_dir=workspace / "shots")
    assert result.ok, result.content
    assert result.data["rendered"] is True
    assert site.script_nonce in result.data["markdown"]
    assert result.data["title"] == "Script App"
    shot = Path(result.data["screenshot"])
    assert shot.parent == workspace / "shots"
    assert shot.read_bytes().startswith(b"\x89PNG")
    # the page's own requests to a loopback site nobody allowed were refused, and said so
    assert victim.paths == []
    assert f"{victim.url}/steal" in result.content
    assert "refused by the network policy" in result.content


@pytest.mark.browser
@needs_chromium
async def test_always_renders_the_script_built_section(site: Site) -> None:
    result = await fetcher(site, "always")(site.url + "/")
    assert result.ok, result.content
    assert result.data["rendered"] is True
    assert site.nonce in result.data["markdown"]
    assert f"built by script {site.script_nonce}" in result.data["markdown"]
    assert "screenshot" not in result.data  # no workspace given


@pytest.mark.browser
@needs_chromium
async def test_auto_leaves_a_readable_page_unrendered(site: Site) -> None:
    result = await fetcher(site, "auto")(site.url + "/")
    assert result.ok
    assert result.data["rendered"] is False
    assert site.paths == ["/"]


async def test_auto_without_chromium_falls_back_to_the_plain_page_and_says_so(
    site: Site, tmp_path: Path
) -> None:
    missing = str(tmp_path / "no-chromium")
    result = await fetcher(site, "auto", chromium=missing)(site.url + "/spa")
    assert result.ok, result.content
    assert result.data["rendered"] is False
    assert (
        f"the page seems to need scripts, but it was not rendered (no Chromium at {missing}"
        in result.content
    )
    assert site.script_nonce not in result.data["markdown"]


async def test_never_does_not_render(site: Site) -> None:
    result = await fetcher(site, "never")(site.url + "/spa")
    assert result.ok
    assert result.data["rendered"] is False
    assert "not rendered" not in result.content


async def test_always_without_chromium_falls_back_and_says_so(site: Site, tmp_path: Path) -> None:
    missing = str(tmp_path / "no-chromium")
    result = await fetcher(site, "always", chromium=missing)(site.url + "/")
    assert result.ok
    assert f"the page was not rendered (no Chromium at {missing}" in result.content
    assert site.nonce in result.data["markdown"]
