"""A fake OpenAI-compatible model server for end-to-end tests and benchmarks.

Real litellm calls reach it over HTTP (streaming and non-streaming). Replies are scripted
per stage (the `X-Agent-Stage` header) through control endpoints:

  POST /_control/script   {"replies": [{"stage": "planning", "content": "...",
                            "finish_reason": "stop", "status": 200, "tool_calls": [...],
                            "hold": "name"}]}        -- appended to that stage's queue
  POST /_control/release/{name}                      -- lets a held reply go
  POST /_control/reset                               -- clears queues and the call log
  GET  /_control/calls                               -- every request seen so far

Every request must carry a positive integer `max_tokens` (planact bounds every reply): one
without it is answered HTTP 400, as a strict server would, so every test that reaches this
server checks it.

With `--auto` (or POST /_control/auto {"on": true, "replies"?: {stage: text}}) a stage
with an empty queue gets a plausible default reply (route: needs tools; planning: one
task; thinking: write a file and finish; summary/auto_reply: text): the zero-latency model
of the benchmarks.
Without it, an unscripted call answers HTTP 500 so the test sees it. POST /_control/auto
{"on": true, "shape": {...}} (or --chunks/--chunk-delay/--first-token-delay) gives auto
replies a stream shape (below); their text is lengthened to fill the chunks.

Usage keys of a scripted reply: "prompt_tokens", "completion_tokens", "cached_tokens"
(reported as OpenAI's `prompt_tokens_details.cached_tokens`), "cache_write_tokens" (on the
Messages API: `cache_creation_input_tokens`; "cached_tokens" is `cache_read_input_tokens`
there, and "prompt_tokens" the uncached rest, `input_tokens`, as Anthropic counts).

POST /v1/messages answers as Anthropic's Messages API (streamed or not), from the same
queues, so litellm's `anthropic/` models can be driven end to end.

POST /_control/cache {"on": true} simulates the providers' prompt caches (tests/cachesim.py):
every call's usage then counts its prompt with tiktoken and reports what OpenAI's cache
(chat completions) or Anthropic's (the Messages API, with the breakpoints sent) would serve.

POST /_control/strict {"on": true} makes the chat-completions endpoint refuse any request
field outside the OpenAI fields a plain server knows (HTTP 400, as servers with strict
request models do).

Stream shape keys of a scripted reply (all optional; without them: 64-character chunks,
no delays, finish reason, usage when asked for, [DONE]):

  "chunks": N            the content in N chunks   "chunk_size": N   N characters a chunk
  "first_token_delay": s before the first chunk   "chunk_delay": s  between chunks
  "keepalive": s         a `: keep-alive` comment every s seconds while waiting
  "keepalive_kind": "comment" | "empty"   empty: an empty-delta chunk instead of a comment
  "hang_after": N        after N content chunks send no more content (keep-alives only)
                         until the client goes away
  "hold_after": N        with "hold": the hold comes after N chunks, not before the reply
  "silent": true         answer nothing at all (no headers) until the client goes away
  "truncate": true       close the stream after the content: no finish reason, no [DONE]
  "done": false          leave out [DONE] (the finish reason is still sent)
  "reasoning": "…"       reasoning deltas before the content, in the field
  "reasoning_field"      "reasoning_content" (default) or "reasoning"
  "tool_call_pieces": N  each tool call's arguments in N deltas (id and name in the first)

Run: python tests/fakellm.py --port 9100 [--host 127.0.0.1] [--auto]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import threading
import time
import uuid
from collections import defaultdict, deque
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

try:
    from tests.cachesim import AnthropicCache, OpenAICache
except ImportError:  # run as a script: python tests/fakellm.py
    from cachesim import AnthropicCache, OpenAICache  # type: ignore[import-not-found,no-redef]

AUTO_REPLIES = {
    "route": '{"task_type": "code_generation", "needs_tools": true}',
    "auto_reply": "Hello from the fake model.",
    "planning": (
        "I'll write the file.\n"
        '[{"title": "Write the file", "description": "Write out.txt", '
        '"requirement": "out.txt exists"}]'
    ),
    "thinking": (
        "<write_code><path>out.txt</path><content>\nhello\n</content></write_code>\n"
        "<finish><message>Wrote out.txt.</message></finish>"
    ),
    "summary": "All done.",
}


# the request fields a plain OpenAI-compatible server knows (strict mode refuses others)
STRICT_FIELDS = frozenset(
    {
        "model",
        "messages",
        "stream",
        "stream_options",
        "temperature",
        "top_p",
        "n",
        "stop",
        "max_tokens",
        "max_completion_tokens",
        "presence_penalty",
        "frequency_penalty",
        "logit_bias",
        "user",
        "tools",
        "tool_choice",
        "response_format",
        "seed",
    }
)

# the longest a silent or hanging reply waits for its client to go away
HANG_CAP = 300.0


class FakeModel:
    def __init__(self, auto: bool = False, shape: dict[str, Any] | None = None) -> None:
        self.auto = auto
        self.initial_shape: dict[str, Any] = dict(shape or {})
        self.shape = dict(self.initial_shape)
        self.auto_replies: dict[str, str] = dict(AUTO_REPLIES)
        self.queues: dict[str, deque[dict[str, Any]]] = defaultdict(deque)
        self.calls: list[dict[str, Any]] = []
        self.holds: dict[str, asyncio.Event] = {}
        self.released: set[str] = set()
        self.strict = False
        self.cache: tuple[OpenAICache, AnthropicCache] | None = None

    def reset(self) -> None:
        self.queues.clear()
        self.calls.clear()
        self.holds.clear()
        self.released.clear()
        self.strict = False
        self.cache = None
        self.shape = dict(self.initial_shape)
        self.auto_replies = dict(AUTO_REPLIES)

    def next_reply(self, stage: str) -> dict[str, Any] | None:
        queue = self.queues.get(stage)
        if queue:
            return queue.popleft()
        if self.auto and stage in self.auto_replies:
            text = self.auto_replies[stage]
            return {**self.shape, "content": _fill(stage, text, self.shape)}
        return None

    # -- endpoints --------------------------------------------------------------------------
    def log_call(self, request: Request, body: dict[str, Any], stage: str) -> None:
        self.calls.append(
            {
                "stage": stage,
                "model": body.get("model"),
                "stream": bool(body.get("stream")),
                "messages": body.get("messages"),
                "max_tokens": body.get("max_tokens"),
                "system": body.get("system"),  # the Messages API's
                # every other field of the request (cache keys, limits, …)
                "params": {k: v for k, v in body.items() if k not in ("messages", "system")},
                "path": request.url.path,
                "authorization": request.headers.get("authorization", ""),
                # the client's address: calls over one pooled connection share it
                "peer": f"{request.client.host}:{request.client.port}" if request.client else "",
                "time": time.time(),
            }
        )

    async def completions(self, request: Request) -> Response:
        body = await request.json()
        stage = request.headers.get("x-agent-stage", "")
        self.log_call(request, body, stage)
        unknown = sorted(set(body) - STRICT_FIELDS) if self.strict else []
        bound = body.get("max_tokens")
        if not isinstance(bound, int) or isinstance(bound, bool) or bound <= 0:
            return JSONResponse(
                {
                    "error": {
                        "message": f"fakellm: max_tokens must be a positive integer, got {bound!r}",
                        "type": "invalid_request_error",
                    }
                },
                status_code=400,
            )
        if unknown:
            return JSONResponse(
                {
                    "error": {
                        "message": f"Unrecognized request argument supplied: {unknown[0]}",
                        "type": "invalid_request_error",
                    }
                },
                status_code=400,
            )
        reply = self.next_reply(stage)
        if reply is None:
            return JSONResponse(
                {
                    "error": {
                        "message": f"fakellm: no scripted reply for stage {stage!r}",
                        "type": "server_error",
                    }
                },
                status_code=500,
            )
        hold = reply.get("hold")
        if hold and reply.get("hold_after") is not None:  # the hold comes mid-stream
            reply = {**reply, "_hold": self.holds.setdefault(hold, asyncio.Event())}
            if hold in self.released:
                reply["_hold"].set()
        elif hold and hold not in self.released:
            event = self.holds.setdefault(hold, asyncio.Event())
            await event.wait()
        if reply.get("silent"):
            await _until_disconnected(request)
            return Response(status_code=204)
        status = int(reply.get("status", 200))
        if status != 200:
            return JSONResponse(
                {
                    "error": {
                        "message": reply.get("content", "scripted error"),
                        "type": "scripted_error",
                        "code": status,
                    }
                },
                status_code=status,
            )
        content = reply.get("content", "")
        finish = reply.get("finish_reason", "stop")
        tool_calls = reply.get("tool_calls")
        usage: dict[str, Any] = {
            "prompt_tokens": reply.get("prompt_tokens", 11),
            "completion_tokens": reply.get("completion_tokens", 7),
        }
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        if reply.get("cached_tokens") is not None:
            usage["prompt_tokens_details"] = {"cached_tokens": reply["cached_tokens"]}
        if self.cache is not None:
            sim = self.cache[0].request(None, body.get("messages") or [])
            self.calls[-1]["usage"] = sim
            usage["prompt_tokens"] = sim.input_tokens
            usage["prompt_tokens_details"] = {"cached_tokens": sim.cache_read}
            usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        cid = f"chatcmpl-{uuid.uuid4().hex[:12]}"
        model = body.get("model", "fake")
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            return StreamingResponse(
                _stream(
                    cid,
                    model,
                    content,
                    finish,
                    tool_calls,
                    usage if include_usage else None,
                    reply,
                ),
                media_type="text/event-stream",
            )
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if reply.get("reasoning"):
            message[reply.get("reasoning_field", "reasoning_content")] = reply["reasoning"]
        if tool_calls:
            message["tool_calls"] = tool_calls
        return JSONResponse(
            {
                "id": cid,
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": usage,
            }
        )

    async def messages(self, request: Request) -> Response:
        """Anthropic's Messages API, enough for litellm's ``anthropic/`` client."""
        body = await request.json()
        stage = request.headers.get("x-agent-stage", "")
        self.log_call(request, body, stage)
        reply = self.next_reply(stage)
        if reply is None or int(reply.get("status", 200)) != 200:
            status = 500 if reply is None else int(reply["status"])
            said = f"no scripted reply for stage {stage!r}" if reply is None else "scripted"
            return JSONResponse(
                {"type": "error", "error": {"type": "api_error", "message": said}},
                status_code=status,
            )
        content = reply.get("content", "")
        usage = {
            "input_tokens": reply.get("prompt_tokens", 11),
            "cache_read_input_tokens": reply.get("cached_tokens", 0),
            "cache_creation_input_tokens": reply.get("cache_write_tokens", 0),
            "output_tokens": reply.get("completion_tokens", 7),
        }
        if self.cache is not None:
            sim = self.cache[1].request(body.get("system"), body.get("messages") or [])
            self.calls[-1]["usage"] = sim
            usage["input_tokens"] = sim.input_tokens - sim.cache_read - sim.cache_write
            usage["cache_read_input_tokens"] = sim.cache_read
            usage["cache_creation_input_tokens"] = sim.cache_write
        mid = f"msg_{uuid.uuid4().hex[:12]}"
        model = body.get("model", "fake")
        if body.get("stream"):
            return StreamingResponse(
                _anthropic_stream(mid, model, content, usage), media_type="text/event-stream"
            )
        return JSONResponse(
            {
                "id": mid,
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [{"type": "text", "text": content}],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": usage,
            }
        )

    async def cache_route(self, request: Request) -> Response:
        on = bool((await request.json()).get("on", True))
        self.cache = (OpenAICache(), AnthropicCache()) if on else None
        return JSONResponse({"cache": on})

    async def strict_route(self, request: Request) -> Response:
        self.strict = bool((await request.json()).get("on", True))
        return JSONResponse({"strict": self.strict})

    async def script(self, request: Request) -> Response:
        data = await request.json()
        for reply in data.get("replies", []):
            self.queues[reply.get("stage", "")].append(reply)
        return JSONResponse({"queued": {k: len(v) for k, v in self.queues.items()}})

    async def release(self, request: Request) -> Response:
        name = request.path_params["name"]
        self.released.add(name)
        if name in self.holds:
            self.holds[name].set()
        return JSONResponse({"released": name})

    async def reset_route(self, _request: Request) -> Response:
        self.reset()
        return JSONResponse({"reset": True})

    async def auto_route(self, request: Request) -> Response:
        data = await request.json()
        self.auto = bool(data.get("on", True))
        if "shape" in data:
            self.shape = dict(data["shape"] or {})
        if "replies" in data:  # per-stage auto replies instead of the defaults
            self.auto_replies = {**AUTO_REPLIES, **(data["replies"] or {})}
        return JSONResponse({"auto": self.auto, "shape": self.shape})

    async def calls_route(self, _request: Request) -> Response:
        return JSONResponse(self.calls)

    async def models(self, _request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": "fake", "object": "model"}]})

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/chat/completions", self.completions, methods=["POST"]),
                Route("/chat/completions", self.completions, methods=["POST"]),
                Route("/v1/models", self.models, methods=["GET"]),
                Route("/v1/messages", self.messages, methods=["POST"]),
                Route("/v1/v1/messages", self.messages, methods=["POST"]),
                Route("/_control/strict", self.strict_route, methods=["POST"]),
                Route("/_control/cache", self.cache_route, methods=["POST"]),
                Route("/_control/script", self.script, methods=["POST"]),
                Route("/_control/release/{name}", self.release, methods=["POST"]),
                Route("/_control/reset", self.reset_route, methods=["POST"]),
                Route("/_control/auto", self.auto_route, methods=["POST"]),
                Route("/_control/calls", self.calls_route, methods=["GET"]),
            ]
        )


async def _stream(
    cid: str,
    model: str,
    content: str,
    finish: str,
    tool_calls: list[dict[str, Any]] | None,
    usage: dict[str, Any] | None,
    shape: dict[str, Any] | None = None,
) -> Any:
    shape = shape or {}
    created = int(time.time())
    head = (
        f'data: {{"id": "{cid}", "object": "chat.completion.chunk", "created": {created}, '
        f'"model": {json.dumps(model)}, "choices": [{{"index": 0, "delta": '
    )

    def chunk(delta: dict[str, Any], reason: str | None = None) -> str:
        return f'{head}{json.dumps(delta)}, "finish_reason": {json.dumps(reason)}}}]}}\n\n'

    keepalive = float(shape.get("keepalive") or 0)
    ping = chunk({}) if shape.get("keepalive_kind") == "empty" else ": keep-alive\n\n"

    async def pause(seconds: float) -> Any:
        """Wait ``seconds``, sending keep-alives meanwhile when asked to."""
        if seconds <= 0:
            return
        if not keepalive:
            await asyncio.sleep(seconds)
            return
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            await asyncio.sleep(min(keepalive, left))
            if time.monotonic() < end:
                yield ping

    yield chunk({"role": "assistant", "content": ""})
    chunk_delay = float(shape.get("chunk_delay") or 0)
    first_delay = float(shape.get("first_token_delay") or 0)
    hang_after = shape.get("hang_after")
    sent = 0
    pieces: list[tuple[str, str]] = []
    reasoning_field = shape.get("reasoning_field", "reasoning_content")
    for field_name, text in ((reasoning_field, shape.get("reasoning") or ""), ("content", content)):
        for piece in _pieces(text, shape):
            pieces.append((field_name, piece))
    hold_after = shape.get("hold_after")
    for field_name, piece in pieces:
        if hang_after is not None and sent >= int(hang_after):
            break
        if hold_after is not None and sent == int(hold_after):
            await shape["_hold"].wait()  # released by the test: the rest follows
        async for ping_text in pause(first_delay if sent == 0 else chunk_delay):
            yield ping_text
        yield chunk({field_name: piece})
        sent += 1
    if hang_after is not None and sent >= int(hang_after):
        async for ping_text in pause(HANG_CAP):
            yield ping_text
        return
    for index, call in enumerate(tool_calls or []):
        for delta in _tool_call_deltas(call, index, int(shape.get("tool_call_pieces") or 1)):
            yield chunk({"tool_calls": [delta]})
    if shape.get("truncate"):
        return
    yield chunk({}, finish)
    if usage is not None:
        data = {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [],
            "usage": usage,
        }
        yield f"data: {json.dumps(data)}\n\n"
    if shape.get("done", True):
        yield "data: [DONE]\n\n"


async def _anthropic_stream(mid: str, model: str, content: str, usage: dict[str, int]) -> Any:
    def event(name: str, data: dict[str, Any]) -> str:
        return f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n"

    start_usage = {**usage, "output_tokens": 1}
    message = {"id": mid, "type": "message", "role": "assistant", "model": model}
    yield event(
        "message_start",
        {"message": {**message, "content": [], "stop_reason": None, "usage": start_usage}},
    )
    yield event("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}})
    for piece in _pieces(content, {}):
        yield event(
            "content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": piece}}
        )
    yield event("content_block_stop", {"index": 0})
    yield event(
        "message_delta",
        {
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": usage["output_tokens"]},
        },
    )
    yield event("message_stop", {})


def _pieces(text: str, shape: dict[str, Any]) -> list[str]:
    if not text:
        return []
    if shape.get("chunks"):
        size = max(1, -(-len(text) // int(shape["chunks"])))
    else:
        size = int(shape.get("chunk_size") or 64)
    return [text[i : i + size] for i in range(0, len(text), size)]


def _tool_call_deltas(call: dict[str, Any], index: int, pieces: int) -> list[dict[str, Any]]:
    if pieces <= 1:
        return [{**call, "index": index}]
    function = call.get("function") or {}
    arguments = str(function.get("arguments", ""))
    size = max(1, -(-len(arguments) // pieces))
    parts = [arguments[i : i + size] for i in range(0, len(arguments), size)] or [""]
    first = {
        "index": index,
        "id": call.get("id", ""),
        "type": "function",
        "function": {"name": function.get("name", ""), "arguments": parts[0]},
    }
    return [first] + [{"index": index, "function": {"arguments": part}} for part in parts[1:]]


def _fill(stage: str, text: str, shape: dict[str, Any]) -> str:
    """Lengthen an auto reply so that ``shape["chunks"]`` chunks of it are ~8 characters."""
    want = int(shape.get("chunks") or 0) * 8
    if len(text) >= want:
        return text
    if stage in ("auto_reply", "summary"):
        return (text + " ") * (want // (len(text) + 1) + 1)
    return text + " " * (want - len(text))  # JSON and XML replies: trailing blanks


async def _until_disconnected(request: Request) -> None:
    """Wait until the client goes away (at most HANG_CAP seconds)."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(HANG_CAP):
            while (await request.receive())["type"] != "http.disconnect":
                pass


class FakeModelServer:
    """The fake model on a free loopback port, in a background thread."""

    def __init__(
        self,
        auto: bool = False,
        host: str = "127.0.0.1",
        port: int = 0,
        shape: dict[str, Any] | None = None,
        model: FakeModel | None = None,
    ) -> None:
        self.model = model or FakeModel(auto=auto, shape=shape)
        config = uvicorn.Config(
            self.model.app(), host=host, port=port, log_level="warning", lifespan="off"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def start(self) -> FakeModelServer:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("fake model server did not start")
            time.sleep(0.01)
        return self

    @property
    def port(self) -> int:
        sock = self.server.servers[0].sockets[0]
        return int(sock.getsockname()[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def script(self, *replies: dict[str, Any]) -> None:
        for reply in replies:
            self.model.queues[reply.get("stage", "")].append(reply)

    def release(self, name: str) -> None:
        self.model.released.add(name)
        loop = self.server_loop
        event = self.model.holds.get(name)
        if event is not None and loop is not None:
            loop.call_soon_threadsafe(event.set)

    @property
    def server_loop(self) -> asyncio.AbstractEventLoop | None:
        for event in self.model.holds.values():
            loop = getattr(event, "_loop", None)
            if loop is not None:
                return loop  # type: ignore[no-any-return]
        return None

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9100)
    parser.add_argument("--auto", action="store_true", help="answer unscripted calls")
    parser.add_argument("--chunks", type=int, default=0, help="auto replies in N chunks")
    parser.add_argument("--chunk-delay", type=float, default=0.0, help="seconds between chunks")
    parser.add_argument(
        "--first-token-delay", type=float, default=0.0, help="seconds before the first chunk"
    )
    args = parser.parse_args()
    shape: dict[str, Any] = {}
    if args.chunks:
        shape["chunks"] = args.chunks
    if args.chunk_delay:
        shape["chunk_delay"] = args.chunk_delay
    if args.first_token_delay:
        shape["first_token_delay"] = args.first_token_delay
    uvicorn.run(
        FakeModel(auto=args.auto, shape=shape).app(),
        host=args.host,
        port=args.port,
        log_level="warning",
    )


if __name__ == "__main__":
    main()
