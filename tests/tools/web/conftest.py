from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.tools.web.site import Site


@pytest.fixture
def site() -> Iterator[Site]:
    server = Site().start()
    yield server
    server.stop()
