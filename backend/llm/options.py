"""What the model clients share: the settings every client takes (``ClientOptions``), the
configured model and the first step of each call (``ModelClient``)."""

from __future__ import annotations

from typing import TypedDict, Unpack

from backend.llm.base import LLMConfigError
from backend.llm.retry import RetryPolicy


class ClientOptions(TypedDict, total=False):
    """The keywords of every client's constructor (defaults in ``ModelClient``)."""

    api_key: str | None
    base_url: str | None
    timeout: float  # seconds without content (LLM_TIMEOUT)
    call_max_seconds: float  # one attempt's hard cap (LLM_CALL_MAX_SECONDS)
    max_retries: int
    max_timeout_retries: int
    retry_base_delay: float
    stream: bool
    max_output_tokens: int | None  # LLM_MAX_OUTPUT_TOKENS (backend/llm/output_limit.py)


def missing_model_error() -> LLMConfigError:
    return LLMConfigError(
        "No model is configured: set LLM_MODEL (a litellm model id such as "
        "openai/gpt-4o-mini or ollama/qwen2.5-coder) and LLM_API_KEY in .env or the "
        "environment, restart planact (settings are read at start-up), then try again."
    )


class ModelClient:
    """A client of the LLM seam: its default model, key, endpoint, deadlines and retries."""

    def __init__(self, model: str | None, **options: Unpack[ClientOptions]) -> None:
        self.model = model
        self.api_key = options.get("api_key")
        self.base_url = options.get("base_url")
        self.timeout = options.get("timeout", 120.0)
        self.call_max_seconds = options.get("call_max_seconds", 600.0)
        self.retry = RetryPolicy(
            options.get("max_retries", 3),
            options.get("max_timeout_retries", 1),
            options.get("retry_base_delay", 1.0),
        )
        self.stream = options.get("stream", True)
        self.max_output_tokens = options.get("max_output_tokens")

    @property
    def default_model(self) -> str | None:
        return self.model

    def model_for(self, model: str | None) -> str:
        """The model a call uses: ``model``, else the default; none at all is a config error."""
        use = model or self.model
        if not use:
            raise missing_model_error()
        return use
