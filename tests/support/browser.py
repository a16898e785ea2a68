"""The system Chromium for browser tests (Playwright never downloads one), the built UI, and
where screenshots go."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import Browser

CHROMIUM = Path(os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium"))
ROOT = Path(__file__).resolve().parents[2]
DIST = ROOT / "frontend" / "dist"
ARTIFACTS = ROOT / "test-artifacts"
LAUNCH_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]


def launched_chromium(missing: str | None = None) -> Iterator[Browser]:
    """The system Chromium launched by Playwright, closed after (a fixture yields from it).
    Skipped when Chromium is missing (or ``missing`` names what else is), failed instead under
    REQUIRE_BROWSER=1."""
    reason = missing or (None if CHROMIUM.exists() else f"{CHROMIUM} is missing")
    if reason:
        if os.environ.get("REQUIRE_BROWSER") == "1":
            pytest.fail(f"REQUIRE_BROWSER=1 but {reason}")
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
        try:
            yield browser
        finally:
            browser.close()
