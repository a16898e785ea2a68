"""GET /api/ready: 200 when the database answers, its migrations are current and the
default runtime works; 503 with the reasons otherwise. /api/health stays a liveness check."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from starlette.testclient import TestClient

from backend.app import create_app
from backend.runtime.bwrap import Bubblewrap
from backend.runtime.local import LocalRuntime
from backend.store.db import head_revision
from tests.pg import postgres_url, wipe
from tests.readiness.forwarder import Forwarder
from tests.support.runtime import require_bwrap, require_docker
from tests.support.settings import make_settings


@pytest.fixture
def pg_url() -> str:
    url = postgres_url()
    wipe(url)
    return url


@pytest.fixture
def forwarder(pg_url: str) -> Iterator[Forwarder]:
    parsed = make_url(pg_url)
    fwd = Forwarder(parsed.host or "127.0.0.1", parsed.port or 5432).start()
    yield fwd
    fwd.close()


def _ready(client: TestClient) -> tuple[int, dict[str, Any]]:
    resp = client.get("/api/ready")
    assert resp.headers["content-type"] == "application/json"
    body: dict[str, Any] = resp.json()
    return resp.status_code, body


def test_ready_turns_503_when_postgresql_is_unreachable_and_200_when_it_is_back(
    tmp_path: Path, pg_url: str, forwarder: Forwarder
) -> None:
    through = make_url(pg_url).set(host="127.0.0.1", port=forwarder.port)
    settings = make_settings(tmp_path, database_url=through.render_as_string(hide_password=False))
    with TestClient(create_app(settings)) as client:
        status, body = _ready(client)
        assert (status, body["status"], body["reasons"]) == (200, "ready", [])
        assert all(check["ok"] for check in body["checks"].values())
        forwarder.cut()
        status, body = _ready(client)
        assert (status, body["status"]) == (503, "unready")
        assert body["checks"]["database"]["ok"] is False
        assert "database does not answer" in body["reasons"][0]
        assert body["error"]["code"] == "unavailable"
        assert client.get("/api/health").status_code == 200  # liveness: still alive
        forwarder.restore()
        status, body = _ready(client)
        assert (status, body["status"], body["reasons"]) == (200, "ready", [])


def test_ready_is_503_while_the_migrations_are_not_current(tmp_path: Path, pg_url: str) -> None:
    with TestClient(create_app(make_settings(tmp_path, database_url=pg_url))) as client:
        assert _ready(client)[0] == 200
        engine = create_engine(pg_url)
        try:
            with engine.begin() as conn:
                conn.execute(text("UPDATE alembic_version SET version_num = '0001'"))
            status, body = _ready(client)
            assert status == 503 and body["checks"]["migrations"]["ok"] is False
            assert body["reasons"] == [
                f"the database is at migration 0001, not the newest ({head_revision()})"
            ]
            assert body["checks"]["database"]["ok"] is True
        finally:
            with engine.begin() as conn:
                conn.execute(
                    text("UPDATE alembic_version SET version_num = :v"), {"v": head_revision()}
                )
            engine.dispose()
        assert _ready(client)[0] == 200


def test_ready_is_503_with_the_reason_when_no_docker_engine_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    with TestClient(create_app(make_settings(tmp_path, runtime="docker"))) as client:
        status, body = _ready(client)
        assert status == 503
        assert body["checks"]["runtime"]["ok"] is False
        assert body["checks"]["database"]["ok"] is True
        assert "docker runtime is not usable" in body["reasons"][0]
        assert "Docker engine" in body["reasons"][0]


def test_ready_is_200_with_a_docker_engine_that_answers(tmp_path: Path) -> None:
    require_docker()
    with TestClient(create_app(make_settings(tmp_path, runtime="docker"))) as client:
        status, body = _ready(client)
        assert status == 200, body
        assert body["checks"]["runtime"] == {"ok": True, "detail": "docker: available"}


def test_ready_needs_no_token_and_answers_a_probe_by_address(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, auth_token="t0ken")
    with TestClient(create_app(settings)) as client:
        assert _ready(client)[0] == 200
        assert client.get("/api/settings").status_code == 401
        # a Kubernetes probe names the pod's address as Host, which no ALLOWED_HOSTS lists
        probe = {"Host": "10.1.2.3:8000"}
        assert client.get("/api/ready", headers=probe).status_code == 200
        assert client.get("/api/openapi.json", headers=probe).status_code == 400


def _local_app(tmp_path: Path, sandbox: Bubblewrap | None) -> Any:
    local = LocalRuntime(sandbox=sandbox)
    return create_app(make_settings(tmp_path), runtimes={"local": local})


def test_ready_runs_a_command_under_bubblewrap_when_the_local_runtime_has_it(
    tmp_path: Path,
) -> None:
    with TestClient(_local_app(tmp_path, require_bwrap())) as client:
        status, body = _ready(client)
        assert status == 200
        assert body["checks"]["runtime"]["detail"] == "local: bubblewrap runs a sandboxed command"


def test_ready_is_503_when_bubblewrap_stopped_working(tmp_path: Path) -> None:
    # the system binary is the boundary: one that refuses, as bwrap does without user
    # namespaces
    broken = tmp_path / "bwrap"
    broken.write_text(
        "#!/bin/sh\necho 'bwrap: No permissions to creating new namespace' >&2\nexit 1\n"
    )
    broken.chmod(0o755)
    with TestClient(_local_app(tmp_path, Bubblewrap(str(broken)))) as client:
        status, body = _ready(client)
        assert status == 503 and body["checks"]["runtime"]["ok"] is False
        assert body["reasons"] == [
            "local: bubblewrap does not work: bwrap: No permissions to creating new namespace"
        ]


def test_ready_needs_nothing_of_an_unsandboxed_local_runtime(tmp_path: Path) -> None:
    with TestClient(_local_app(tmp_path, None)) as client:
        status, body = _ready(client)
        assert status == 200
        assert body["checks"]["runtime"]["detail"] == "local, unsandboxed: nothing to check"
