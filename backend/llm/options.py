"""What the model clients share: the settings every client takes (``ClientOptions``), the
configured model and the frame of each call (``ModelClient.complete``): the model it uses,
its attempts under the retry policy, each attempt under its deadlines with the live deltas of
the first attempt that sends any. A client says only how one attempt is made (``prepare``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypedDict, Unpack

from backend.llm.base import Completion, DeltaCallback, LLMConfigError
from backend.llm.deadline import Deadline
from backend.llm.retry import FirstLive, RetryPolicy

# one attempt of a call: under its deadline (touched on content), with its delta callback
Attempt = Callable[[Deadline, DeltaCallback | None], Awaitable[Completion]]


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

    async def complete(
        self,
        *,
        stage: str,
        messages: list[dict[str, Any]],
        model: str | None = None,
        on_delta: DeltaCallback | None = None,
    ) -> Completion:
        """One model call (the LLM seam, backend/llm/base.py): its attempts as ``prepare``
        makes them, retried by the policy (backend/llm/retry.py), each under LLM_TIMEOUT and
        LLM_CALL_MAX_SECONDS (backend/llm/deadline.py)."""
        use = self.model_for(model)
        call = await self.prepare(stage, messages, use)
        live = FirstLive(on_delta)

        async def attempt() -> Completion:
            deltas = live.for_attempt()
            async with Deadline(idle=self.timeout, hard=self.call_max_seconds) as deadline:
                return await call(deadline, deltas)

        return await self.completed(await self.retry.run(stage, attempt), use)

    async def prepare(self, stage: str, messages: list[dict[str, Any]], model: str) -> Attempt:
        """What is worked out once per call (the request), and how one attempt is made."""
        raise NotImplementedError

    async def completed(self, got: Completion, model: str) -> Completion:
        """The reply of the attempt that succeeded, finished (priced, say) out of its deadline."""
        return got


def stream_fields() -> dict[str, Any]:
    """What a streamed request asks for besides the messages: the usage in its last chunk."""
    return {"stream": True, "stream_options": {"include_usage": True}}
