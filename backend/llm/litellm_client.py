"""litellm-backed LLM, for providers that are not OpenAI-compatible (Anthropic, Gemini,
Bedrock, Ollama's native API…) and for LLM_CLIENT=litellm. Same seam, retry policy and
deadlines as the lean path (backend/llm/openai_compat.py); one contract suite covers both
(tests/llm/test_contract.py).

What litellm cannot do the same way, and what we do about it:
- it replaces a missing finish reason with "stop": we read the finish reason the provider
  really sent (``CustomStreamWrapper.received_finish_reason``) so that a stream cut off
  without one is a truncated reply, as on the lean path; a stream that sends ``[DONE]`` but
  no finish reason counts as truncated here (the lean path accepts it);
- it fails a call after 100 identical chunks in a row (a guard against looping models): we
  raise that limit, since identical chunks are legitimate content (``----`` rules, padding).
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
import sys
import threading
from typing import Any

import anyio

from backend.llm.base import (
    Completion,
    DeltaCallback,
    LLMConfigError,
    LLMError,
    LLMTransientError,
    LLMTruncatedError,
)
from backend.llm.caching import breakpoints, cache_key, takes_cache_control, takes_cache_key
from backend.llm.deadline import Deadline
from backend.llm.not_found import not_found_error
from backend.llm.openai_compat import YIELD_EVERY
from backend.llm.options import Attempt, ModelClient, stream_fields
from backend.llm.output_limit import max_tokens
from backend.llm.prices import Prices, cache_cost, cost, lookup, prices
from backend.llm.retry import short

log = logging.getLogger(__name__)

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

_MISSING_KEY = "Missing credentials"


class LiteLLM(ModelClient):
    async def prepare(self, stage: str, messages: list[dict[str, Any]], model: str) -> Attempt:
        litellm = await _litellm()
        await prices(model)  # the price table is read off the loop, once
        kwargs: dict[str, Any] = {
            "model": model,
            "messages": messages,
            "extra_headers": {"X-Agent-Stage": stage},
            "max_tokens": await max_tokens(model, self.max_output_tokens, stage),
            # the socket timeout; our content-only deadlines fire first
            "timeout": self.call_max_seconds + 5,
            "num_retries": 0,
        }
        if self.api_key:
            kwargs["api_key"] = self.api_key
        if self.base_url:
            kwargs["api_base"] = self.base_url
        if self.stream:
            kwargs.update(stream_fields())
        if takes_cache_control(model):
            kwargs["cache_control_injection_points"] = breakpoints(messages)
        elif _openai_itself(model, self.base_url) and (key := cache_key()):
            kwargs["prompt_cache_key"] = key  # calls of one conversation, one cache

        async def attempt(deadline: Deadline, deltas: DeltaCallback | None) -> Completion:
            try:
                return await self._call(litellm, kwargs, model, deadline, deltas)
            except Exception as exc:
                ours = _our_error(litellm, exc, model, self.base_url, stage)
                if ours is exc:
                    raise
                raise ours from exc

        return attempt

    async def aclose(self) -> None:
        """Close the connections litellm keeps for its providers (its Anthropic client's
        among them), on this loop: none outlives the client."""
        if _LITELLM is None:
            return
        from litellm.llms.custom_httpx.async_client_cleanup import close_litellm_async_clients

        await close_litellm_async_clients()  # type: ignore[no-untyped-call]

    async def _call(
        self,
        litellm: Any,
        kwargs: dict[str, Any],
        model: str,
        deadline: Deadline,
        on_delta: DeltaCallback | None,
    ) -> Completion:
        response = await litellm.acompletion(**kwargs)
        if not self.stream:
            got = _from_response(litellm, response, model)
            if on_delta is not None:
                if got.reasoning:
                    on_delta("reasoning", got.reasoning)
                if got.text:
                    on_delta("text", got.text)
            return got
        parts: list[str] = []
        reasoning: list[str] = []
        finish: str | None = None
        usage: Any = None
        tool_calls: dict[int, dict[str, Any]] = {}
        count = 0
        try:
            async for chunk in response:
                count += 1
                if count % YIELD_EVERY == 0:
                    await asyncio.sleep(0)  # a buffered stream must not hold the loop
                if getattr(chunk, "usage", None):
                    usage = chunk.usage
                for choice in chunk.choices or []:
                    delta = choice.delta
                    if delta is not None:
                        if delta.content:
                            parts.append(delta.content)
                            deadline.touch()
                            if on_delta is not None:
                                on_delta("text", delta.content)
                        piece = getattr(delta, "reasoning_content", None)
                        if piece:
                            reasoning.append(piece)
                            deadline.touch()
                            if on_delta is not None:
                                on_delta("reasoning", piece)
                        for tc in getattr(delta, "tool_calls", None) or []:
                            deadline.touch()
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
                                name = tc.function.name
                                if name and name != slot["function"]["name"]:
                                    slot["function"]["name"] += name
                                if tc.function.arguments:
                                    slot["function"]["arguments"] += tc.function.arguments
                    if choice.finish_reason:
                        finish = choice.finish_reason
                        deadline.touch()
        finally:
            closer = getattr(response, "aclose", None)
            if closer is not None:
                try:
                    await closer()
                except Exception:  # closing a failed stream: nothing more to learn
                    log.debug("closing the litellm stream failed", exc_info=True)
        sent = getattr(response, "received_finish_reason", None) or getattr(
            response, "intermittent_finish_reason", None
        )
        if sent is None:
            raise LLMTruncatedError(
                "the model stream ended without a finish reason: the reply was cut off "
                f"after {sum(map(len, parts))} characters"
            )
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


def _openai_itself(model: str, base_url: str | None) -> bool:
    """An ``openai/`` model sent to OpenAI's own API (no other URL set)."""
    url = base_url or os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_BASE")
    return model.startswith("openai/") and (not url or takes_cache_key(url))


def _our_error(
    litellm: Any, exc: Exception, model: str, base_url: str | None, stage: str
) -> Exception:
    """What a failed litellm call raises: litellm's error said as ours (a config error, a
    transient one that is retried, or a failure for good); any other error as it is."""
    retryable = (
        litellm.RateLimitError,
        litellm.InternalServerError,
        litellm.ServiceUnavailableError,
        litellm.APIConnectionError,
        litellm.Timeout,
        litellm.BadGatewayError,
    )
    if isinstance(exc, litellm.AuthenticationError | litellm.PermissionDeniedError):
        return LLMConfigError(
            f"The provider rejected the credentials for model {model!r}: "
            f"check LLM_API_KEY (and LLM_BASE_URL). Provider said: {short(exc)}"
        )
    if isinstance(exc, litellm.NotFoundError):
        return not_found_error(model, _url_of(model, base_url), short(exc))
    if isinstance(exc, litellm.BadRequestError):
        text = str(exc)
        if "LLM Provider NOT provided" in text or "llm_provider" in text:
            return LLMConfigError(
                f"LLM_MODEL={model!r} names no known provider: use a litellm id "
                "such as openai/gpt-4o-mini."
            )
        return LLMError(f"The model rejected the request: {short(exc)}")
    if isinstance(exc, retryable):
        if _MISSING_KEY in str(exc):  # the openai SDK's, reported as a 500
            return LLMConfigError(
                f"Model {model!r} needs an API key: set LLM_API_KEY (any value for "
                "a local server that checks none)."
            )
        return LLMTransientError(short(exc))
    if isinstance(exc, litellm.APIError):
        # litellm maps some statuses (403 from an OpenAI-compatible server) to APIError
        status = getattr(exc, "status_code", None)
        if status in (401, 403):
            return LLMConfigError(
                f"The provider rejected the credentials for model {model!r} "
                f"(HTTP {status}): check LLM_API_KEY (and LLM_BASE_URL). Provider "
                f"said: {short(exc)}"
            )
        if status in (408, 409) or (isinstance(status, int) and status >= 500):
            return LLMTransientError(short(exc))
        return LLMError(f"The model call ({stage}) failed: {short(exc)}")
    return exc


_LITELLM: Any = None
_IMPORT_LOCK = threading.Lock()


def _url_of(model: str, base_url: str | None) -> str:
    """Where litellm sent ``model``'s request, as far as we know it (its errors carry a
    placeholder request)."""
    base = (base_url or "").rstrip("/")
    prefix = model.partition("/")[0]
    if prefix in ("ollama", "ollama_chat"):
        path = "/api/chat" if prefix == "ollama_chat" else "/api/generate"
        return f"{base or 'http://localhost:11434'}{path}"
    return base or f"the {prefix} provider's URL"


def import_litellm() -> Any:
    """Import and configure litellm once (blocking: seconds). One lock for every caller:
    two threads importing litellm at once can see it half-initialised."""
    global _LITELLM
    with _IMPORT_LOCK:
        if _LITELLM is None:
            if "litellm" not in sys.modules:
                # an import of litellm that failed half-way (in another thread, say) left its
                # submodules in sys.modules without the package: a new import would never
                # bind them to it ("partially initialized module 'litellm' has no attribute
                # 'utils'"), so every piece of it goes and it is imported whole
                _forget_litellm()
            module: Any = importlib.import_module("litellm")
            module.suppress_debug_info = True
            # we keep our own usage and cost: spare the per-chunk logging work
            module.disable_streaming_logging = True
            module.logging = False
            # identical chunks in a row are content, not a loop (see the module docstring)
            module.REPEATED_STREAMING_CHUNK_LIMIT = 1_000_000_000
            _LITELLM = module
    return _LITELLM


def _forget_litellm() -> None:
    for name in [n for n in sys.modules if n == "litellm" or n.startswith("litellm.")]:
        del sys.modules[name]


async def _litellm() -> Any:
    """litellm, imported lazily (server start stays fast) and in a worker thread: the
    import takes seconds and must never freeze the event loop."""
    if _LITELLM is not None:
        return _LITELLM
    return await anyio.to_thread.run_sync(import_litellm)


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
    """Tokens from litellm's ``Usage``: ``prompt_tokens`` counts every input token (litellm
    adds Anthropic's cache reads and writes to it), ``prompt_tokens_details.cached_tokens`` or
    ``cache_read_input_tokens`` the ones read from cache, ``cache_creation_input_tokens`` the
    ones written to it. Priced at the table's cached rates (backend/llm/prices.py)."""
    if usage is None:
        return
    completion.prompt_tokens = _tokens(getattr(usage, "prompt_tokens", 0))
    completion.completion_tokens = _tokens(getattr(usage, "completion_tokens", 0))
    details = getattr(usage, "prompt_tokens_details", None)
    read = _tokens(getattr(details, "cached_tokens", 0)) or _tokens(
        getattr(usage, "cache_read_input_tokens", 0)
    )
    completion.cached_input_tokens = min(completion.prompt_tokens, read)
    completion.cache_write_tokens = min(
        completion.prompt_tokens - completion.cached_input_tokens,
        _tokens(getattr(usage, "cache_creation_input_tokens", 0)),
    )
    found = _prices(litellm, model)
    completion.cache_cost = cache_cost(
        found, completion.cached_input_tokens, completion.cache_write_tokens
    )
    completion.cost = cost(
        found,
        completion.prompt_tokens,
        completion.completion_tokens,
        completion.cached_input_tokens,
        completion.cache_write_tokens,
    )


def _tokens(value: Any) -> int:
    return int(value) if isinstance(value, int | float) and value > 0 else 0


_PRICES: dict[str, Prices | None] = {}


def _prices(litellm: Any, model: str) -> Prices | None:
    """USD per token (input, output, cached read, cache write), looked up once per model:
    litellm's price table (its cached rates where it has them), else litellm's own resolution
    of the model's name (``litellm.cost_per_token``: slow, hence once) with the input rate for
    cached tokens; None when litellm does not know the model's price."""
    if model not in _PRICES:
        found = lookup(model)
        if found is None:
            try:
                prompt, _ = litellm.cost_per_token(
                    model=model, prompt_tokens=1, completion_tokens=0
                )
                _, out = litellm.cost_per_token(model=model, prompt_tokens=0, completion_tokens=1)
                found = Prices(float(prompt), float(out), float(prompt), float(prompt))
            except Exception:  # unknown model: cost not known
                found = None
        _PRICES[model] = found
    return _PRICES[model]
