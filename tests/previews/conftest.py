"""Previews end to end: the real `planact serve` (its preview listener), a scripted model over
real HTTP, services in bubblewrap or docker, the page in Chromium."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakellm import FakeModelServer
from tests.support.browser import launched_chromium
from tests.support.preview_origin import origin  # noqa: F401 (the listener's fixture)
from tests.support.previews import RUNTIMES, PreviewServer, start_preview_server


@pytest.fixture(params=RUNTIMES)
def preview_server(
    request: pytest.FixtureRequest, tmp_path: Path, fake_model: FakeModelServer
) -> Iterator[PreviewServer]:
    yield from start_preview_server(request.param, tmp_path, fake_model)


# one browser per module (as tests/ui/conftest.py's), for the preview pages in Chromium
@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    yield from launched_chromium()
