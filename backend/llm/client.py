"""litellm-backed LLM: stage header, streaming, bounded retries with backoff, usage."""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
import random
from typing import Any

import anyio

from backend.llm.base import Completion, LLMConfigError, LLMError

log = logging.getLogger(__name__)

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


class LiteLLM:
    def __init__(
        self,
        model: str | None,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 120.0,
        max_retries: int = 3,
        retry_base_delay: float = 1.0,
        stream: bool = True,
    ) -> None:
        self.model = model
        self.api_key = api_key
        self.base_url = base_url
        self.timeout = timeout
        self.max_retries = max_retries
        self.retry_base_delay = retry_base_delay
        self.stream = stream

    @property
    def default_model(self) -> str | None:
        return self.model

    async def complete(
        self, *, stage: str, messages: list[dict[str, Any]], model: str | None = None
    ) -> Completion:
        use_model = model or self.model
        if not use_model:
            raise LLMConfigError(
                "No model is configured: set LLM_MODEL (a litellm model id such as "
                "openai/gpt-4o-mini or ollama/qwen2.5-coder) and LLM_API_KEY in .env or the "
                "environment, restart planact (settings are read at start-up), then try again."
            )
        litellm = await _litellm()
        kwargs: dict[str, Any] = {
            "model": use_model,
            "messages": messages,
            "extra_headers": {"X-Agent-Stage": stage},
            "timeout": self.timeout,
            "num_retries": 0,
        }
        if self.api_key:
            kwargs["api_key"] = self.api_key
        if self.base_url:
            kwargs["api_base"] = self.base_url
        if self.stream:
            kwargs["stream"] = True
            kwargs["stream_options"] = {"include_usage": True}

        retryable = (
            litellm.RateLimitError,
            litellm.InternalServerError,
            litellm.ServiceUnavailableError,
            litellm.APIConnectionError,
            litellm.Timeout,
            litellm.BadGatewayError,
        )
        attempt = 0
        while True:
            try:
                return await self._call(litellm, kwargs, use_model)
            except (litellm.AuthenticationError, litellm.PermissionDeniedError) as exc:
                raise LLMConfigError(
                    f"The provider rejected the credentials for model {use_model!r}: "
                    f"check LLM_API_KEY (and LLM_BASE_URL). Provider said: {_short(exc)}"
                ) from exc
            except litellm.NotFoundError as exc:
                raise LLMConfigError(
                    f"Model {use_model!r} was not found by the provider: check LLM_MODEL. "
                    f"Provider said: {_short(exc)}"
                ) from exc
            except litellm.BadRequestError as exc:
                text = str(exc)
                if "LLM Provider NOT provided" in text or "llm_provider" in text:
                    raise LLMConfigError(
                        f"LLM_MODEL={use_model!r} names no known provider: use a litellm id "
                        "such as openai/gpt-4o-mini."
                    ) from exc
                raise LLMError(f"The model rejected the request: {_short(exc)}") from exc
            except retryable as exc:
                attempt += 1
                if attempt > self.max_retries:
                    raise LLMError(
                        f"The model call ({stage}) failed after {attempt} attempts: {_short(exc)}"
                    ) from exc
                delay = self.retry_base_delay * (2 ** (attempt - 1)) * (0.5 + random.random())
                log.warning("model call %s failed (%s); retry in %.2fs", stage, exc, delay)
                await asyncio.sleep(delay)
            except litellm.APIError as exc:
                raise LLMError(f"The model call ({stage}) failed: {_short(exc)}") from exc

    async def _call(self, litellm: Any, kwargs: dict[str, Any], model: str) -> Completion:
        response = await litellm.acompletion(**kwargs)
        if not self.stream:
            return _from_response(litellm, response, model)
        parts: list[str] = []
        reasoning: list[str] = []
        finish: str | None = None
        usage: Any = None
        tool_calls: dict[int, dict[str, Any]] = {}
        async for chunk in response:
            if getattr(chunk, "usage", None):
                usage = chunk.usage
            for choice in chunk.choices or []:
                delta = choice.delta
                if delta is not None:
                    if delta.content:
                        parts.append(delta.content)
                    if getattr(delta, "reasoning_content", None):
                        reasoning.append(delta.reasoning_content)
                    for tc in getattr(delta, "tool_calls", None) or []:
                        slot = tool_calls.setdefault(
                            tc.index or 0,
                            {
                                "id": "",
                                "type": "function",
                                "function": {"name": "", "arguments": ""},
                            },
                        )
                        if tc.id:
                            slot["id"] = tc.id
                        if tc.function is not None:
                            if tc.function.name:
                                slot["function"]["name"] += tc.function.name
                            if tc.function.arguments:
                                slot["function"]["arguments"] += tc.function.arguments
                if choice.finish_reason:
                    finish = choice.finish_reason
        text = "".join(parts)
        completion = Completion(
            text=text,
            model=model,
            finish_reason=finish,
            tool_calls=[tool_calls[i] for i in sorted(tool_calls)] or None,
            reasoning="".join(reasoning),
        )
        _fill_usage(litellm, completion, usage, model)
        return completion


_LITELLM: Any = None


async def _litellm() -> Any:
    """litellm, imported lazily (server start stays fast) and in a worker thread: the
    import takes seconds and must never freeze the event loop."""
    global _LITELLM
    if _LITELLM is None:
        module: Any = await anyio.to_thread.run_sync(importlib.import_module, "litellm")
        module.suppress_debug_info = True
        # we keep our own usage and cost: spare the per-chunk logging work
        module.disable_streaming_logging = True
        module.logging = False
        _LITELLM = module
    return _LITELLM


def _from_response(litellm: Any, response: Any, model: str) -> Completion:
    choice = response.choices[0]
    msg = choice.message
    calls = None
    if getattr(msg, "tool_calls", None):
        calls = [
            {
                "id": tc.id,
                "type": "function",
                "function": {"name": tc.function.name, "arguments": tc.function.arguments},
            }
            for tc in msg.tool_calls
        ]
    completion = Completion(
        text=msg.content or "",
        model=model,
        finish_reason=choice.finish_reason,
        tool_calls=calls,
        reasoning=getattr(msg, "reasoning_content", None) or "",
    )
    _fill_usage(litellm, completion, getattr(response, "usage", None), model)
    return completion


def _fill_usage(litellm: Any, completion: Completion, usage: Any, model: str) -> None:
    if usage is None:
        return
    completion.prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
    completion.completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
    prices = _prices(litellm, model)
    if prices is not None:
        completion.cost = (
            completion.prompt_tokens * prices[0] + completion.completion_tokens * prices[1]
        )


_PRICES: dict[str, tuple[float, float] | None] = {}


def _prices(litellm: Any, model: str) -> tuple[float, float] | None:
    """USD per prompt token and per completion token, looked up once per model (litellm's
    lookup is slow); None when litellm does not know the model's price."""
    if model not in _PRICES:
        try:
            prompt, _ = litellm.cost_per_token(model=model, prompt_tokens=1, completion_tokens=0)
            _, completion = litellm.cost_per_token(
                model=model, prompt_tokens=0, completion_tokens=1
            )
            _PRICES[model] = (float(prompt), float(completion))
        except Exception:  # unknown model: cost not known
            _PRICES[model] = None
    return _PRICES[model]


def _short(exc: BaseException, limit: int = 300) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[:limit] + "…"
