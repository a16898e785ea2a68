"""A fake OpenAI-compatible model server for end-to-end tests and benchmarks.

Real litellm calls reach it over HTTP (streaming and non-streaming). Replies are scripted
per stage (the `X-Agent-Stage` header) through control endpoints:

  POST /_control/script   {"replies": [{"stage": "planning", "content": "...",
                            "finish_reason": "stop", "status": 200, "tool_calls": [...],
                            "hold": "name", "hold_after": N, "chunks": N}]}
                                                     -- appended to that stage's queue
                            ("hold_after": the hold comes after N content chunks)
  POST /_control/release/{name}                      -- lets a held reply go
  POST /_control/reset                               -- clears queues and the call log
  GET  /_control/calls                               -- every request seen so far

With `--auto` (or POST /_control/auto {"on": true}) a stage with an empty queue gets a
plausible default reply (route: needs tools; planning: one task; thinking: write a file
and finish; summary/auto_reply: text): the zero-latency model of the benchmarks.
Without it, an unscripted call answers HTTP 500 so the test sees it.

Run: python tests/fakellm.py --port 9100 [--host 127.0.0.1] [--auto]
"""

from __future__ import annotations

import argparse
import asyncio
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


class FakeModel:
    def __init__(self, auto: bool = False) -> None:
        self.auto = auto
        self.queues: dict[str, deque[dict[str, Any]]] = defaultdict(deque)
        self.calls: list[dict[str, Any]] = []
        self.holds: dict[str, asyncio.Event] = {}
        self.released: set[str] = set()

    def reset(self) -> None:
        self.queues.clear()
        self.calls.clear()
        self.holds.clear()
        self.released.clear()

    def next_reply(self, stage: str) -> dict[str, Any] | None:
        queue = self.queues.get(stage)
        if queue:
            return queue.popleft()
        if self.auto and stage in AUTO_REPLIES:
            return {"content": AUTO_REPLIES[stage]}
        return None

    # -- endpoints --------------------------------------------------------------------------
    async def completions(self, request: Request) -> Response:
        body = await request.json()
        stage = request.headers.get("x-agent-stage", "")
        self.calls.append(
            {
                "stage": stage,
                "model": body.get("model"),
                "stream": bool(body.get("stream")),
                "messages": body.get("messages"),
                "authorization": request.headers.get("authorization", ""),
                "time": time.time(),
            }
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
        hold_after = reply.get("hold_after")  # hold after N content chunks, not before
        mid_hold: asyncio.Event | None = None
        if hold and hold_after is not None:
            mid_hold = self.holds.setdefault(hold, asyncio.Event())
            if hold in self.released:
                mid_hold.set()
        elif hold and hold not in self.released:
            event = self.holds.setdefault(hold, asyncio.Event())
            await event.wait()
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
        usage = {
            "prompt_tokens": reply.get("prompt_tokens", 11),
            "completion_tokens": reply.get("completion_tokens", 7),
        }
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
                    chunks=int(reply.get("chunks") or 0),
                    pause=(int(hold_after), mid_hold) if mid_hold is not None else None,
                ),
                media_type="text/event-stream",
            )
        message: dict[str, Any] = {"role": "assistant", "content": content}
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
        self.auto = bool((await request.json()).get("on", True))
        return JSONResponse({"auto": self.auto})

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
    usage: dict[str, int] | None,
    chunks: int = 0,
    pause: tuple[int, asyncio.Event] | None = None,
) -> Any:
    def chunk(delta: dict[str, Any], reason: str | None = None) -> str:
        data = {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": reason}],
        }
        return f"data: {json.dumps(data)}\n\n"

    yield chunk({"role": "assistant", "content": ""})
    step = max(1, -(-len(content) // chunks)) if chunks else 64
    for n, i in enumerate(range(0, len(content), step)):
        if pause is not None and n == pause[0]:
            await pause[1].wait()  # the test releases it: the rest of the reply follows
        yield chunk({"content": content[i : i + step]})
    for index, call in enumerate(tool_calls or []):
        yield chunk({"tool_calls": [{**call, "index": index}]})
    yield chunk({}, finish)
    if usage is not None:
        data = {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
            "choices": [],
            "usage": usage,
        }
        yield f"data: {json.dumps(data)}\n\n"
    yield "data: [DONE]\n\n"


class FakeModelServer:
    """The fake model on a free loopback port, in a background thread."""

    def __init__(self, auto: bool = False, host: str = "127.0.0.1", port: int = 0) -> None:
        self.model = FakeModel(auto=auto)
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
    args = parser.parse_args()
    uvicorn.run(
        FakeModel(auto=args.auto).app(), host=args.host, port=args.port, log_level="warning"
    )


if __name__ == "__main__":
    main()
