"""Shared fixtures. Real model calls are impossible: the LLM is a ScriptedLLM or the fake
OpenAI-compatible server in tests/fakellm.py."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
# no test may reach a real provider
for _var in ("LLM_MODEL", "LLM_API_KEY", "LLM_BASE_URL", "OPENAI_API_KEY", "AUTH_TOKEN"):
    os.environ.pop(_var, None)

from backend.config import Settings  # noqa: E402
from tests.exitwatch import pytest_sessionfinish, pytest_unconfigure  # noqa: E402, F401
from tests.fakellm import FakeModelServer  # noqa: E402
from tests.migrated import place_migrated  # noqa: E402
from tests.pg import postgres_url, reset  # noqa: E402
from tests.skipsummary import pytest_terminal_summary  # noqa: E402, F401
from tests.support.settings import make_settings  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def no_sandbox_left_behind(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The suite leaves no docker sandbox behind: at its end, any sandbox whose workspace
    lies under this session's temporary folder (a killed server's, say) is removed; other
    sessions' and deployments' sandboxes are left alone."""
    yield
    if os.environ.get("DOCKER_HOST") is None and not Path("/var/run/docker.sock").exists():
        return
    from tests.support.sandboxes import remove_sandboxes_under

    try:
        remove_sandboxes_under(tmp_path_factory.getbasetemp())
    except Exception as exc:  # no engine answering: nothing of ours can be there
        print(f"\nno sandbox clean-up ({type(exc).__name__}: {exc})")


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return make_settings(tmp_path)


@pytest.fixture(scope="session")
def fake_model_server() -> Iterator[FakeModelServer]:
    server = FakeModelServer().start()
    yield server
    server.stop()


@pytest.fixture
def fake_model(fake_model_server: FakeModelServer) -> Iterator[FakeModelServer]:
    fake_model_server.model.reset()
    fake_model_server.model.auto = False
    yield fake_model_server
    # release anything a test left held, so the server thread can stop
    for name in list(fake_model_server.model.holds):
        fake_model_server.release(name)


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, migrated database of each kind: a copy of the migrated SQLite file in the
    test's folder (tests/migrated.py), or the PostgreSQL test database (TEST_POSTGRES_URL)
    emptied to its freshly migrated state (tests/pg.py reset)."""
    if request.param == "sqlite":
        place_migrated(tmp_path / "db.sqlite")
        return f"sqlite:///{tmp_path}/db.sqlite"
    url = postgres_url()
    reset(url)
    return url
