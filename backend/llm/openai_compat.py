"""The lean path: OpenAI-compatible chat completions with httpx and a plain SSE/JSON parse.

One shared ``httpx.AsyncClient`` per event loop (connection pooling) whose connections are
aiohttp's (``httpx_aiohttp``): httpx's own HTTP/1.1 stack (httpcore, h11, anyio) spends
about three times aiohttp's CPU on each read of a streamed reply, and a run reads ~800 of
them (docs/figures.md). Per streamed chunk one JSON parse (:func:`decode_chunk`) and a few
dict lookups, nothing kept but the text pieces. Which models come here:
backend/llm/providers.py. Retries: backend/llm/retry.py. Deadlines: backend/llm/deadline.py.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
from typing import Any, Unpack

import aiohttp
import httpx
import orjson
from httpx_aiohttp import AiohttpTransport

from backend.llm.base import (
    Completion,
    DeltaCallback,
    LLMConfigError,
    LLMError,
    LLMTransientError,
    LLMTruncatedError,
)
from backend.llm.caching import cache_key, takes_cache_key
from backend.llm.deadline import Deadline
from backend.llm.not_found import not_found_error
from backend.llm.options import Attempt, ClientOptions, ModelClient, stream_fields
from backend.llm.output_limit import max_tokens
from backend.llm.prices import cache_cost, cost, prices
from backend.llm.providers import Endpoint, lean_endpoint
from backend.llm.retry import short

log = logging.getLogger(__name__)

# a buffered stream is consumed in slices of this many events, with a yield to the event
# loop between slices, so that a reply that is already whole in the buffer never holds
# other requests up for more than a fraction of a millisecond
YIELD_EVERY = 32
# the longest SSE line accepted (a server that never sends a newline is not a stream)
MAX_LINE = 16 * 2**20
# a streamed tool call numbered past this is taken as unnumbered (calls count from 0)
MAX_TOOL_INDEX = 1024
# how much of an error body is read (error messages only)
ERROR_BODY_LIMIT = 64 * 1024
# idle connections are dropped before the 5 s keep-alive of uvicorn-based servers (vLLM)
# would close them under a request
KEEPALIVE_SECONDS = 4.0
_std_decode = json.JSONDecoder().decode


def decode_chunk(payload: bytes) -> Any:
    """One streamed chunk's JSON. orjson parses it (a third of the standard parser's time,
    ~800 chunks a run); the standard parser decides what orjson refuses (it is stricter: a
    lone surrogate escape, NaN, an overflowing exponent), so a chunk is accepted exactly
    when it was before, and parsed to the same value but for an integer past 64 bits, which
    orjson reads as the nearest float (no field of a chunk that is read holds one in a real
    reply: token counts, tool-call indices). Raises ValueError when neither takes it (not
    UTF-8, not JSON)."""
    try:
        return orjson.loads(payload)
    except orjson.JSONDecodeError:
        return _std_decode(payload.decode())


class OpenAICompatLLM(ModelClient):
    """The LLM seam over any OpenAI-compatible ``/chat/completions`` endpoint."""

    def __init__(
        self,
        model: str | None,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        **options: Unpack[ClientOptions],
    ) -> None:
        super().__init__(model, **options)
        self.transport = transport
        self._client: httpx.AsyncClient | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None

    def endpoint(self, model: str) -> Endpoint | None:
        return lean_endpoint(model, self.base_url, self.api_key)

    def client(self) -> httpx.AsyncClient:
        """The shared client of the running event loop (pooled connections are bound to
        the loop that opened them; a new loop, as in some tests, gets a new client).
        Every URL goes over aiohttp's connections but one the proxy variables (HTTP_PROXY,
        NO_PROXY, …) send through a proxy or exempt from it: httpx's own transports take
        those, as before (a mount for all URLs leaves httpx reading those variables)."""
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            # one TLS context (certifi's roots, ~15 ms to load) for httpx's transports and
            # aiohttp's connections alike
            tls = httpx.create_ssl_context()
            aio = AiohttpTransport(verify=tls, client=lambda: _session(tls))
            self._client = httpx.AsyncClient(
                # deadlines are ours (content-only idle timer, hard cap per attempt)
                timeout=httpx.Timeout(None),
                limits=httpx.Limits(
                    max_connections=None,
                    max_keepalive_connections=64,
                    keepalive_expiry=KEEPALIVE_SECONDS,
                ),
                verify=tls,
                transport=self.transport,
                mounts=None if self.transport else {"all://": aio},
            )
            self._client_loop = loop
        return self._client

    async def aclose(self) -> None:
        if self._client is not None and self._client_loop is asyncio.get_running_loop():
            await self._client.aclose()
        self._client = None

    async def prepare(self, stage: str, messages: list[dict[str, Any]], model: str) -> Attempt:
        endpoint = self.endpoint(model)
        if endpoint is None:
            raise LLMConfigError(
                f"LLM_MODEL={model!r} is not served by an OpenAI-compatible endpoint: "
                "set LLM_BASE_URL or use a litellm id such as openai/gpt-4o-mini."
            )
        headers = {"Content-Type": "application/json", "X-Agent-Stage": stage}
        if endpoint.api_key:
            headers["Authorization"] = f"Bearer {endpoint.api_key}"
        payload: dict[str, Any] = {
            "model": endpoint.model,
            "messages": messages,
            _limit_key(endpoint): await max_tokens(model, self.max_output_tokens, stage),
        }
        if takes_cache_key(endpoint.url) and (key := cache_key()):
            payload["prompt_cache_key"] = key  # calls of one conversation, one cache
        if self.stream:
            payload.update(stream_fields())
            headers["Accept"] = "text/event-stream"
        # ensure_ascii: a lone surrogate in the history is escaped, never an encode error
        body = json.dumps(payload).encode()

        async def attempt(deadline: Deadline, deltas: DeltaCallback | None) -> Completion:
            try:
                if self.stream:
                    return await self._stream(endpoint, headers, body, deadline, deltas)
                return await self._once(endpoint, headers, body, deltas)
            except (httpx.TransportError, aiohttp.ClientError) as exc:
                raise LLMTransientError(
                    f"could not reach the model at {endpoint.url}: "
                    f"{short(exc) or type(exc).__name__}"
                ) from exc

        return attempt

    async def completed(self, got: Completion, model: str) -> Completion:
        """The model's name, and the reply priced by litellm's table (read without litellm)."""
        got.model = model
        if got.prompt_tokens or got.completion_tokens:
            found = await prices(model)
            got.cache_cost = cache_cost(found, got.cached_input_tokens, got.cache_write_tokens)
            got.cost = cost(
                found,
                got.prompt_tokens,
                got.completion_tokens,
                got.cached_input_tokens,
                got.cache_write_tokens,
            )
        return got

    # -- one attempt -------------------------------------------------------------------------
    async def _once(
        self,
        endpoint: Endpoint,
        headers: dict[str, str],
        body: bytes,
        on_delta: DeltaCallback | None,
    ) -> Completion:
        response = await self.client().post(endpoint.url, content=body, headers=headers)
        if response.status_code != 200:
            raise http_error(response.status_code, response.content, endpoint, response)
        try:
            data = json.loads(response.content)
            choice = data["choices"][0]
            message = choice.get("message") or {}
            text = message.get("content") or ""
            reasoning = message.get("reasoning_content") or message.get("reasoning") or ""
            if not isinstance(text, str) or not isinstance(reasoning, str):
                raise TypeError("content is not text")
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            raise LLMTransientError(
                f"the model server answered something that is not a chat completion: "
                f"{short(response.text, 200)}"
            ) from exc
        if on_delta is not None:
            if reasoning:
                on_delta("reasoning", reasoning)
            if text:
                on_delta("text", text)
        calls = message.get("tool_calls")
        got = Completion(
            text=text,
            finish_reason=choice.get("finish_reason"),
            tool_calls=calls if isinstance(calls, list) and calls else None,
            reasoning=reasoning,
        )
        _usage(got, data.get("usage"))
        return got

    async def _stream(
        self,
        endpoint: Endpoint,
        headers: dict[str, str],
        body: bytes,
        deadline: Deadline,
        on_delta: DeltaCallback | None,
    ) -> Completion:
        request = self.client().build_request("POST", endpoint.url, content=body, headers=headers)
        response = await self.client().send(request, stream=True)
        try:
            if response.status_code != 200:
                raw = await _read_capped(response)
                raise http_error(response.status_code, raw, endpoint, response)
            reader = _StreamReader(deadline, on_delta)
            await reader.read(response)
            return reader.completion()
        finally:
            await response.aclose()


class _StreamReader:
    """The SSE parse of one streamed reply: accumulates text, reasoning, tool calls, usage
    and the finish reason; knows whether the stream ended properly."""

    __slots__ = (
        "deadline",
        "done",
        "finish",
        "on_delta",
        "reasoning",
        "text",
        "tools",
        "usage",
    )

    def __init__(self, deadline: Deadline, on_delta: DeltaCallback | None) -> None:
        self.deadline = deadline
        self.on_delta = on_delta
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.tools: list[dict[str, Any]] = []
        self.usage: Any = None
        self.finish: str | None = None
        self.done = False

    async def read(self, response: httpx.Response) -> None:
        pending = b""
        data: list[bytes] = []  # the data lines of the event being read
        events = 0
        async for block in response.aiter_bytes():
            if self.done:
                continue  # read the body to its end: the connection goes back to the pool
            if pending:
                block = pending + block
            lines = block.split(b"\n")
            pending = lines.pop()
            if len(pending) > MAX_LINE:
                raise LLMTransientError(
                    f"the model stream sent a line longer than {MAX_LINE // 2**20} MB"
                )
            for line in lines:
                if line[:5] == b"data:":
                    data.append(line[5:].strip())
                elif line and line != b"\r":
                    continue  # a comment (keep-alive), or event:/id:/retry:
                elif data:
                    # blank line: the event is complete
                    payload = data[0] if len(data) == 1 else b"\n".join(data)
                    data.clear()
                    if self.event(payload):
                        break
                    events += 1
                    if events >= YIELD_EVERY:
                        events = 0
                        await asyncio.sleep(0)
        if self.done:
            return
        if pending[:5] == b"data:":
            data.append(pending[5:].strip())
        if data:  # the server left out the last blank line
            self.event(data[0] if len(data) == 1 else b"\n".join(data))

    def event(self, payload: bytes) -> bool:
        """Handle one event; True at ``[DONE]``."""
        if payload == b"[DONE]":
            self.done = True
            return True
        try:
            obj = decode_chunk(payload)
        except ValueError as exc:
            raise LLMTransientError(
                f"the model stream sent a chunk that is not JSON: {short(repr(payload), 120)}"
            ) from exc
        try:
            self.chunk(obj)
        except (AttributeError, TypeError, ValueError, KeyError, IndexError) as exc:
            raise LLMTransientError(
                f"the model stream sent a malformed chunk: {short(repr(payload), 120)}"
            ) from exc
        return False

    def chunk(self, obj: dict[str, Any]) -> None:
        error = obj.get("error")
        if error:
            message = error.get("message") if isinstance(error, dict) else error
            said = short(str(message))
            raise LLMTransientError(f"the provider reported an error mid-stream: {said}")
        usage = obj.get("usage")
        if usage:
            self.usage = usage
        choices = obj.get("choices")
        if choices:
            choice = choices[0]
            delta = choice.get("delta")
            content = False  # the idle timer starts over once per chunk that carries any
            if delta:
                piece = delta.get("content")
                if piece and isinstance(piece, str):
                    self.text.append(piece)
                    content = True
                    if self.on_delta is not None:
                        self.on_delta("text", piece)
                piece = delta.get("reasoning_content") or delta.get("reasoning")
                if piece and isinstance(piece, str):
                    self.reasoning.append(piece)
                    content = True
                    if self.on_delta is not None:
                        self.on_delta("reasoning", piece)
                calls = delta.get("tool_calls")
                if calls:
                    self.tool_deltas(calls)
                    content = True
            finish = choice.get("finish_reason")
            if finish:
                self.finish = str(finish)
                content = True
            if content:
                self.deadline.touch()

    def tool_deltas(self, calls: list[dict[str, Any]]) -> None:
        tools = self.tools
        for call in calls:
            index = call.get("index")
            if not isinstance(index, int) or index >= MAX_TOOL_INDEX:
                # no index (or a made-up one: the list never grows to it): a new call
                # when it carries a new id, else the last one
                new = call.get("id") and not any(t["id"] == call["id"] for t in tools)
                index = len(tools) if (new or not tools) else len(tools) - 1
            while len(tools) <= index:
                tools.append(
                    {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}
                )
            slot = tools[index]
            if call.get("id"):
                slot["id"] = call["id"]
            function = call.get("function") or {}
            name = function.get("name")
            if name and name != slot["function"]["name"]:
                # streamed in pieces by most servers; some repeat the whole name
                slot["function"]["name"] += name
            arguments = function.get("arguments")
            if arguments:
                if not isinstance(arguments, str):
                    arguments = json.dumps(arguments)
                slot["function"]["arguments"] += arguments

    def completion(self) -> Completion:
        if not self.done and self.finish is None:
            raise LLMTruncatedError(
                "the model stream ended without a finish reason or [DONE]: the reply was "
                f"cut off after {sum(map(len, self.text))} characters"
            )
        got = Completion(
            text="".join(self.text),
            finish_reason=self.finish,
            tool_calls=self.tools or None,
            reasoning="".join(self.reasoning),
        )
        _usage(got, self.usage)
        return got


def _limit_key(endpoint: Endpoint) -> str:
    """OpenAI's own API takes the output limit as ``max_completion_tokens`` (its reasoning
    models refuse ``max_tokens``); every other OpenAI-compatible server takes ``max_tokens``."""
    if endpoint.url.startswith("https://api.openai.com/"):
        return "max_completion_tokens"
    return "max_tokens"


def _session(tls: ssl.SSLContext) -> aiohttp.ClientSession:
    """The connections of a client (made on its loop at its first request): unlimited in
    number and verified with the client's TLS context, as httpx's are. Without aiohttp's
    ``trust_env``, which would read the proxy variables and ~/.netrc in a thread on every
    request: httpx has read them once (:meth:`OpenAICompatLLM.client`)."""
    connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=KEEPALIVE_SECONDS, ssl=tls)
    return aiohttp.ClientSession(connector=connector)


def _usage(got: Completion, usage: Any) -> None:
    """Tokens from an OpenAI-style ``usage``, the cached ones included: OpenAI's
    ``prompt_tokens_details.cached_tokens`` (OpenRouter adds ``cache_write_tokens`` there),
    DeepSeek's ``prompt_cache_hit_tokens``, and the Anthropic names a proxy in front of
    Claude passes through (``cache_read_input_tokens``, ``cache_creation_input_tokens``)."""
    if not isinstance(usage, dict):
        return
    got.prompt_tokens = _count(usage.get("prompt_tokens"))
    got.completion_tokens = _count(usage.get("completion_tokens"))
    details = usage.get("prompt_tokens_details")
    details = details if isinstance(details, dict) else {}
    got.cached_input_tokens = min(
        got.prompt_tokens,
        _count(details.get("cached_tokens"))
        or _count(usage.get("prompt_cache_hit_tokens"))
        or _count(usage.get("cache_read_input_tokens")),
    )
    got.cache_write_tokens = min(
        got.prompt_tokens - got.cached_input_tokens,
        _count(details.get("cache_write_tokens"))
        or _count(usage.get("cache_creation_input_tokens")),
    )


def _count(value: Any) -> int:
    return int(value) if isinstance(value, int | float) and value > 0 else 0


async def _read_capped(response: httpx.Response) -> bytes:
    parts: list[bytes] = []
    size = 0
    async for block in response.aiter_bytes():
        parts.append(block)
        size += len(block)
        if size >= ERROR_BODY_LIMIT:
            break
    return b"".join(parts)


def http_error(
    status: int, raw: bytes, endpoint: Endpoint, response: httpx.Response | None = None
) -> LLMError:
    said = _provider_message(raw)
    model = endpoint.model
    if status in (401, 403):
        return LLMConfigError(
            f"The provider rejected the credentials for model {model!r} (HTTP {status}): "
            f"check LLM_API_KEY (and LLM_BASE_URL). Provider said: {said}"
        )
    if status == 404:
        return not_found_error(model, endpoint.url, said)
    if status in (408, 409, 429) or status >= 500:
        error = LLMTransientError(f"HTTP {status} from the model server: {said}")
        if response is not None:
            error.retry_after = _retry_after(response)  # type: ignore[attr-defined]
        return error
    return LLMError(f"The model rejected the request (HTTP {status}): {said}")


def _provider_message(raw: bytes) -> str:
    try:
        data = json.loads(raw)
    except ValueError:
        return short(raw.decode("utf-8", "replace")) or "(no message)"
    if isinstance(data, dict):
        error = data.get("error", data)
        if isinstance(error, dict) and error.get("message"):
            return short(str(error["message"]))
        if isinstance(error, str):
            return short(error)
    return short(json.dumps(data))


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None
