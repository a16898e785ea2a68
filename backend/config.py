"""Settings, read once at the edge (environment and ./.env)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

# litellm must never fetch its price table from the internet at import.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1"}
# PREVIEW_HOST_PATTERN: "*." then a host name, perhaps ":port"
PREVIEW_HOST_PATTERN = re.compile(
    r"^\*\.((?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)*[a-z0-9-]*[a-z][a-z0-9-]*)(?::(\d{1,5}))?$"
)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_file=".env", env_file_encoding="utf-8", extra="ignore", case_sensitive=False
    )

    llm_model: str | None = None
    llm_api_key: str | None = None
    llm_base_url: str | None = None
    llm_max_retries: int = 3
    llm_retry_base_delay: float = 1.0
    llm_stream: bool = True
    # model call deadlines (backend/llm/deadline.py): LLM_TIMEOUT is the longest a call may
    # go without content (keep-alive comments and empty chunks do not count; retried once),
    # LLM_CALL_MAX_SECONDS the hard cap on one attempt (not retried). LLM_CLIENT: "auto"
    # reads OpenAI-compatible endpoints with the lean httpx path (backend/llm/providers.py),
    # "litellm" sends every call through litellm.
    llm_timeout: float = Field(default=120.0, gt=0)
    llm_call_max_seconds: float = Field(default=600.0, gt=0)
    llm_client: Literal["auto", "litellm"] = "auto"
    # the max_tokens of every model call; unset: the model's own output limit where
    # litellm's table knows it, else 8192 (backend/llm/output_limit.py)
    llm_max_output_tokens: int | None = Field(default=None, gt=0)
    # models a user may pick per run ("model" in the run body); LLM_MODEL only when unset
    llm_models: str | None = None

    specialists_file: Path | None = None
    database_url: str = "sqlite:///./data/planact.db"
    workspace_dir: Path = Path("./workspace")
    runtime: str = "local"  # a name in the runtime registry (backend/runtime/registry.py)
    terminal_timeout: float = 120.0
    max_steps_per_task: int = 20
    max_format_errors: int = 3

    # workspace size limit (both runtimes): write_code/edit_file are refused when a file
    # would bring one conversation's workspace over it; a terminal_run that pushed it over
    # says so in its result (uploads use it too)
    workspace_max_mb: float = Field(default=1024, gt=0)

    # checkpoints of every workspace (backend/checkpoints): a shadow git repository per
    # conversation under CHECKPOINT_DIR (default <WORKSPACE_DIR>/.checkpoints, beside the
    # workspaces, never inside one), at most CHECKPOINT_MAX_MB each (the oldest pruned)
    checkpoint_dir: Path | None = None
    checkpoint_max_mb: float = Field(default=1024, gt=0)

    # Per-run budgets, checked before every model call; the first one reached ends the run
    # with an `error` naming it. None (or 0, or an empty value) means no limit.
    run_max_tokens: int | None = 2_000_000
    run_max_cost_usd: float | None = None
    run_max_seconds: float | None = 3600.0
    run_max_model_calls: int | None = 200

    @field_validator(
        "run_max_tokens",
        "run_max_cost_usd",
        "run_max_seconds",
        "run_max_model_calls",
        mode="before",
    )
    @classmethod
    def _no_limit(cls, value: object) -> object:
        if isinstance(value, str) and value.strip().lower() in ("", "none", "off", "0"):
            return None
        return value

    # the local runtime's sandbox (backend/runtime/sandboxing.py, docs/security.md): auto =
    # bubblewrap when it works (probed at start), bwrap = refuse to start without it, off =
    # commands run unsandboxed as the server's user (a warning at start)
    local_sandbox: Literal["auto", "bwrap", "off"] = "auto"
    # several users in AUTH_TOKENS on an unsandboxed local runtime: refused at start unless 1
    allow_shared_local: bool = False

    # docker runtime
    sandbox_image: str = "planact-sandbox:latest"
    # both sandboxes (docker, local bubblewrap): "none" (default) or "bridge" = network on;
    # 1/on/true read as bridge, 0/off/false as none
    sandbox_network: Literal["none", "bridge"] = "none"

    @field_validator("sandbox_network", mode="before")
    @classmethod
    def _network_switch(cls, value: object) -> object:
        if isinstance(value, str):
            word = value.strip().lower()
            if word in ("1", "on", "true", "yes"):
                return "bridge"
            if word in ("", "0", "off", "false", "no"):
                return "none"
        return value

    sandbox_memory: str = "1g"
    sandbox_cpus: float = 1.0
    sandbox_pids: int = 256
    sandbox_idle_timeout: float = 900.0
    # size of the sandbox's tmpfs /tmp (docker size string, e.g. "256m"); none: the smaller
    # of 256m and a quarter of SANDBOX_MEMORY (a full /tmp must not starve the commands)
    sandbox_tmp_size: str | None = None
    # where WORKSPACE_DIR lives on the Docker host when the app itself runs in a container
    sandbox_host_workspace_dir: Path | None = None
    sandbox_uid: int | None = None
    sandbox_gid: int | None = None

    # uploads (POST /api/conversations/{id}/files): the size of one upload request in MB
    # (2**20 bytes); WORKSPACE_MAX_MB above bounds the workspace they may grow
    upload_max_mb: float = 50

    auth_token: str | None = None
    # optional multi-user form: "alice:token1,bob:token2"
    auth_tokens: str | None = None

    host: str = "127.0.0.1"
    port: int = 8000

    # ---- the HTTP edge (docs/security.md) ----------------------------------------------
    # Host header values answered besides the loopback names and the bound HOST
    # (comma-separated; "name" or "name:port"; "*" = any)
    allowed_hosts: str = ""
    # origins (scheme://host[:port]) allowed to make state-changing requests besides the
    # server's own; "*" = any (turns the cross-site defence off)
    allowed_origins: str = ""
    # seconds a client may take to send a request's headers / between two body chunks
    http_header_timeout: float = 10.0
    http_body_timeout: float = 30.0
    # seconds a response may stay unsent to a client that does not read (SSE included)
    http_write_timeout: float = 30.0
    # open connections at most (also capped by the open-files limit)
    http_max_connections: int = 2048

    # -- runs in the store (backend/runs): leases, executors, shutdown --------------------
    executor: Literal["inline", "queue"] = "inline"
    lease_seconds: float = 12.0  # an owner renews its lease every third of this
    shutdown_grace: float = 30.0
    # times a run may be taken over from a dead owner (or handed over) before it fails
    run_max_resumes: int = Field(default=3, ge=0)
    worker_concurrency: int = 4  # runs one `planact worker` executes at once
    # -- runs that wait for a person (backend/waits, docs/api.md "Runs that wait for a person")
    # -----------------
    # which actions ask before they run: never | risky (terminal, web, mcp) | always
    approval_mode: Literal["never", "risky", "always"] = "never"
    # seconds a run waits for an answer (approval or question) before it is rejected
    approval_timeout: float = Field(default=1800.0, gt=0)

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

    # ---- actions a deployment adds (docs/tools.md "A new action"): Python modules or
    # packages, comma-separated, each module with an ``ACTION`` (one named as a builtin
    # action replaces it)
    action_modules: str = ""

    @property
    def action_module_names(self) -> list[str]:
        return [name.strip() for name in self.action_modules.split(",") if name.strip()]

    # ---- runtimes a deployment adds (backend/runtime/registry.py): ``module:Class``,
    # comma-separated, each a BaseRuntime subclass named as no other runtime is
    runtime_modules: str = ""

    @property
    def runtime_module_paths(self) -> list[str]:
        return [path.strip() for path in self.runtime_modules.split(",") if path.strip()]

    # ---- tools beyond the sandbox: web search and web pages (docs/tools.md) -------------
    # web_search provider: searxng (SEARCH_URL), ddgs (keyless), tavily or brave (SEARCH_API_KEY);
    # unset: web_search is not offered to the model
    search_provider: Literal["searxng", "ddgs", "tavily", "brave"] | None = None
    # searxng: its base URL (required); tavily/brave: overrides their public API base URL
    search_url: str | None = None
    search_api_key: str | None = None
    search_max: int = Field(default=8, ge=1, le=50)  # results given to the model at most
    # web_fetch (a page's main content as Markdown): offered unless 0
    web_fetch: bool = True
    # seconds for a whole fetch (redirects and rendering included) and for a search
    web_timeout: float = Field(default=20.0, gt=0)
    web_max_bytes: int = Field(default=5_000_000, gt=0)  # body bytes read at most
    # render pages with headless Chromium (Playwright): auto (when the page needs scripts and
    # Chromium is there), never, always
    web_render: Literal["auto", "never", "always"] = "auto"
    # hosts (or host:port) web_fetch may reach even on loopback/private addresses, comma-separated
    web_allow_hosts: str = ""

    @field_validator("search_provider", mode="before")
    @classmethod
    def _empty_search_provider(cls, value: object) -> object:
        # SEARCH_PROVIDER= (empty, as .env files write it) means no provider
        if isinstance(value, str) and not value.strip():
            return None
        return value.strip().lower() if isinstance(value, str) else value

    # -- MCP servers (backend/tools/mcp, docs/tools.md) -----------------------------------
    # a JSON file {"mcpServers": {"name": {"command", "args"?, "env"?} | {"url", "headers"?}}}
    mcp_servers_file: Path | None = None
    mcp_call_timeout: float = Field(default=60.0, gt=0)  # seconds one tool call may take
    mcp_start_timeout: float = Field(default=30.0, gt=0)  # seconds a server may take to start
    # seconds before a server that failed to start is tried again (doubling, at most 60)
    mcp_restart_backoff: float = Field(default=1.0, ge=0)

    # -- sandbox limits (backend/runtime/limits, docs/security.md) ------------------------
    # per conversation, in both sandboxed runtimes (docker, local under bubblewrap), while a
    # command runs. SANDBOX_MEMORY_MB / SANDBOX_TMP_MB take the place of SANDBOX_MEMORY /
    # SANDBOX_TMP_SIZE (docker size strings, still read when these are unset); SANDBOX_PIDS
    # and SANDBOX_CPUS above hold for the bubblewrap sandbox too
    sandbox_memory_mb: int | None = Field(default=None, gt=0)
    sandbox_tmp_mb: int | None = Field(default=None, gt=0)

    # mcp config: MCP_SERVERS_FILE= (empty, as .env files write it) means no servers
    @field_validator("mcp_servers_file", mode="before")
    @classmethod
    def _empty_mcp_servers_file(cls, value: object) -> object:
        if isinstance(value, str) and not value.strip():
            return None
        return value

    # -- metrics and traces (backend/observe, docs/api.md "Operating it") ----------------
    metrics: bool = True  # GET /metrics (and a worker's METRICS_PORT listener); 0 turns off
    # a bearer token /metrics asks for; unset: only loopback clients are answered
    metrics_token: str | None = None
    # `planact worker`: its own /metrics listener (0: none)
    metrics_host: str = "127.0.0.1"
    metrics_port: int = Field(default=9464, ge=0, le=65535)
    # -- runtimes a run may pick (backend/api/runtimes.py, docs/api.md) -------------------
    # comma-separated, RUNTIME among them, e.g. RUNTIMES=docker,local; empty: every runtime,
    # but never an unsandboxed one beside a sandboxed RUNTIME
    runtimes: str = ""
    # -- downloads: the workspace zip (backend/api/archive.py, docs/api.md) ---------------
    # zips made at once by one server process; one more is refused at once (429)
    zip_max_concurrent: int = Field(default=2, ge=1)
    # -- previews of what the agent builds (backend/previews, docs/api.md "Previews") ----
    # the preview listener's address; unset: http://127.0.0.1:<PORT+1>, each preview on a host
    # of its own under it, http://<token>.localhost:<PORT+1> (browsers resolve *.localhost)
    preview_url: str | None = None
    # the port the preview listener binds when PREVIEW_URL is a proxy's address (else its port)
    preview_listen_port: int | None = Field(default=None, ge=1, le=65535)
    # where browsers reach that listener when it is published on another port (Compose:
    # PLANACT_PREVIEW_PORT, "8002" or "127.0.0.1:8002"): previews are then
    # http://<token>.localhost:<that port>
    preview_public_port: str | None = None
    # 0: no preview listener in this process; unset: `planact serve` and `run` start one
    preview_listen: bool | None = None
    preview_start_timeout: float = Field(default=60.0, gt=0)  # seconds until the port listens
    preview_max_per_conversation: int = Field(default=3, ge=1)  # services at once
    preview_idle_seconds: float = Field(default=1800.0, gt=0)  # stopped after no request
    preview_max_seconds: float = Field(default=86400.0, gt=0)  # stopped at this age
    preview_token_ttl: float = Field(default=86400.0, gt=0)  # seconds a preview URL works
    preview_log_lines: int = Field(default=200, ge=1)  # last lines of a service's output kept
    preview_max_per_user: int = Field(default=6, ge=1)  # services at once, all conversations
    # connections the preview listener serves at once; one more is answered 503 and closed
    preview_max_connections: int = Field(default=1024, ge=1)
    # seconds a request body (or a head) may go without a byte before the request is cut off
    preview_body_timeout: float = Field(default=30.0, gt=0)
    # PREVIEW_URL without PREVIEW_HOST_PATTERN serves every preview on one origin, where one
    # previewed page can reach the others: refused with several users unless this is set
    allow_shared_preview_origin: bool = False
    # where the services' Unix sockets are made (short: socket paths are limited to 107 bytes)
    preview_socket_dir: Path | None = None

    # per-preview hosts instead of /p/<token>/ paths: "*.preview.example.com" (a wildcard
    # DNS name and a proxy to the preview listener); the scheme is PREVIEW_URL's
    preview_host_pattern: str | None = None

    @field_validator("preview_host_pattern", mode="before")
    @classmethod
    def _host_pattern(cls, value: object) -> object:
        if not isinstance(value, str) or not value.strip():
            return None
        pattern = value.strip().lower()
        found = PREVIEW_HOST_PATTERN.match(pattern)
        if found is None or (found.group(2) and not 0 < int(found.group(2)) < 65536):
            raise ValueError(
                f"PREVIEW_HOST_PATTERN {value!r} is not '*.' followed by a host name (and "
                "perhaps ':port'), e.g. '*.preview.example.com'"
            )
        return pattern

    def preview_hosts(self) -> str | None:
        """The per-preview host pattern: PREVIEW_HOST_PATTERN, else ``*.localhost:<port>``
        under the default listener; None when PREVIEW_URL is one shared origin."""
        if self.preview_host_pattern:
            return self.preview_host_pattern
        if self.preview_url:
            return None
        return f"*.localhost:{self._preview_port()}"

    def _preview_port(self) -> int:
        """The port browsers reach the preview listener on, with PREVIEW_URL unset."""
        published = (self.preview_public_port or "").strip().rsplit(":", 1)[-1]
        return int(published) if published.isdigit() else self.port + 1

    def preview_base(self) -> str:
        """The preview origin, without a trailing slash."""
        if self.preview_url:
            return self.preview_url.rstrip("/")
        return f"http://127.0.0.1:{self._preview_port()}"
