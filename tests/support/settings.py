"""Settings for tests: an isolated configuration under a test's tmp_path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from backend.config import Settings
from tests.migrated import place_migrated


def make_settings(tmp_path: Path, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "database_url": f"sqlite:///{tmp_path}/planact.db",
        "workspace_dir": tmp_path / "workspace",
        "terminal_timeout": 20,
        "llm_model": "scripted/model",
        "llm_retry_base_delay": 0.01,
        "frontend_dist": tmp_path / "no-ui",
        # the Host header of Starlette's TestClient
        "allowed_hosts": "testserver",
    }
    values.update(overrides)
    if "database_url" not in overrides:
        place_migrated(tmp_path / "planact.db")  # a copy, not the migrations again
    return Settings(_env_file=None, **values)
