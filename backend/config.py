"""Settings, read once at the edge (environment and ./.env)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

# litellm must never fetch its price table from the internet at import.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1"}


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_file=".env", env_file_encoding="utf-8", extra="ignore", case_sensitive=False
    )

    llm_model: str | None = None
    llm_api_key: str | None = None
    llm_base_url: str | None = None
    llm_timeout: float = 120.0
    llm_max_retries: int = 3
    llm_retry_base_delay: float = 1.0
    llm_stream: bool = True
    # models a user may pick per run ("model" in the run body); LLM_MODEL only when unset
    llm_models: str | None = None

    specialists_file: Path | None = None
    database_url: str = "sqlite:///./data/planact.db"
    workspace_dir: Path = Path("./workspace")
    runtime: Literal["local", "docker"] = "local"
    terminal_timeout: float = 120.0
    max_steps_per_task: int = 20
    max_format_errors: int = 3

    # docker runtime
    sandbox_image: str = "planact-sandbox:latest"
    sandbox_network: Literal["none", "bridge"] = "none"
    sandbox_memory: str = "1g"
    sandbox_cpus: float = 1.0
    sandbox_pids: int = 256
    sandbox_idle_timeout: float = 900.0
    # where WORKSPACE_DIR lives on the Docker host when the app itself runs in a container
    sandbox_host_workspace_dir: Path | None = None
    sandbox_uid: int | None = None
    sandbox_gid: int | None = None

    # uploads (POST /api/conversations/{id}/files): the size of one upload request, and the
    # size a conversation's workspace may reach through uploads, in MB (2**20 bytes)
    upload_max_mb: float = 50
    workspace_max_mb: float = 1024

    auth_token: str | None = None
    # optional multi-user form: "alice:token1,bob:token2"
    auth_tokens: str | None = None

    host: str = "127.0.0.1"
    port: int = 8000
    frontend_dist: Path = Field(
        default_factory=lambda: Path(__file__).resolve().parent.parent / "frontend" / "dist"
    )

    def user_tokens(self) -> dict[str, str]:
        """token -> user id."""
        tokens: dict[str, str] = {}
        if self.auth_token:
            tokens[self.auth_token] = "1"
        for pair in (self.auth_tokens or "").split(","):
            if ":" in pair:
                user, token = pair.split(":", 1)
                if user.strip() and token.strip():
                    tokens[token.strip()] = user.strip()
        return tokens

    @model_validator(mode="after")
    def _default_model_from_list(self) -> Settings:
        # LLM_MODELS without LLM_MODEL: the first listed model is the default
        if not self.llm_model and self.llm_models:
            first = next((m.strip() for m in self.llm_models.split(",") if m.strip()), None)
            self.llm_model = first
        return self

    def model_choices(self) -> list[str]:
        """LLM_MODEL first, then LLM_MODELS (comma-separated), without duplicates."""
        out: list[str] = []
        for name in [self.llm_model or "", *(self.llm_models or "").split(",")]:
            name = name.strip()
            if name and name not in out:
                out.append(name)
        return out

    @property
    def auth_enabled(self) -> bool:
        return bool(self.user_tokens())
