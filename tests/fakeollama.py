"""A fake Ollama: the fake model (tests/fakellm.py) answering as Ollama does on both of its
APIs, for the README's local-model lines.

- the OpenAI-compatible one under ``/v1`` (``/v1/chat/completions``), scripted as the fake
  model is;
- the native one: ``POST /api/chat`` (litellm's ``ollama_chat/``) and ``POST /api/generate``
  (``ollama/``), streamed as NDJSON (or one JSON object with ``"stream": false``), the
  reply taken from the same per-stage script; ``/api/show``, ``/api/tags``,
  ``/api/version``;
- a model it does not have: HTTP 404 ``model "x" not found, try pulling it first`` (as
  JSON, on both APIs); any other path: HTTP 404 with the text ``404 page not found``, as
  Ollama's router answers.

Each native request is logged in ``calls`` as the OpenAI ones are, with ``path``, and its
bound (``options.num_predict``) as ``max_tokens``.
"""

from __future__ import annotations

import json
import time
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.fakellm import FakeModel, FakeModelServer

MODELS = ("qwen2.5-coder", "qwen2.5-coder:latest")


def _not_found(model: Any, openai: bool) -> JSONResponse:
    said = f'model "{model}" not found, try pulling it first'
    body: dict[str, Any] = (
        {"error": {"message": said, "type": "api_error", "param": None, "code": None}}
        if openai
        else {"error": said}
    )
    return JSONResponse(body, status_code=404)


class FakeOllama(FakeModel):
    async def completions(self, request: Request) -> Response:
        body = json.loads(await request.body() or b"{}")
        if body.get("model") not in MODELS:
            return _not_found(body.get("model"), openai=True)
        return await super().completions(request)

    async def native(self, request: Request) -> Response:
        body = json.loads(await request.body() or b"{}")
        chat = request.url.path == "/api/chat"
        if body.get("model") not in MODELS:
            return _not_found(body.get("model"), openai=False)
        stage = request.headers.get("x-agent-stage", "")
        options = body.get("options") or {}
        self.calls.append(
            {
                "stage": stage,
                "path": request.url.path,
                "model": body.get("model"),
                "stream": body.get("stream", True) is not False,
                "messages": body.get("messages") if chat else body.get("prompt"),
                "max_tokens": options.get("num_predict"),
                "time": time.time(),
            }
        )
        reply = self.next_reply(stage)
        if reply is None:
            return JSONResponse({"error": f"no scripted reply for stage {stage!r}"}, 500)
        text = str(reply.get("content", ""))
        model = body["model"]

        def piece(part: str, done: bool) -> dict[str, Any]:
            out: dict[str, Any] = {"model": model, "created_at": "2026-01-01T00:00:00Z"}
            if chat:
                out["message"] = {"role": "assistant", "content": part}
            else:
                out["response"] = part
            out["done"] = done
            if done:
                out.update(
                    done_reason="length" if reply.get("finish_reason") == "length" else "stop",
                    prompt_eval_count=11,
                    eval_count=7,
                )
            return out

        if body.get("stream", True) is False:
            return JSONResponse(piece(text, True))
        parts = [text[i : i + 16] for i in range(0, len(text), 16)]
        lines = [json.dumps(piece(p, False)) + "\n" for p in parts]
        lines.append(json.dumps(piece("", True)) + "\n")
        return StreamingResponse(iter(lines), media_type="application/x-ndjson")

    async def show(self, request: Request) -> Response:
        body = json.loads(await request.body() or b"{}")
        name = body.get("model") or body.get("name")
        if name not in MODELS:
            return _not_found(name, openai=False)
        return JSONResponse(
            {"template": "{{ .Prompt }}", "details": {"family": "qwen2"}, "model_info": {}}
        )

    async def tags(self, _request: Request) -> Response:
        return JSONResponse({"models": [{"name": m, "model": m} for m in MODELS]})

    async def version(self, _request: Request) -> Response:
        return JSONResponse({"version": "0.12.0"})

    async def unknown(self, _request: Request) -> Response:
        return PlainTextResponse("404 page not found", status_code=404)

    def app(self) -> Starlette:
        app = super().app()
        # Ollama serves its OpenAI-compatible API under /v1 only
        app.router.routes[:] = [
            r for r in app.router.routes if getattr(r, "path", "") != "/chat/completions"
        ]
        app.router.routes.extend(
            [
                Route("/api/chat", self.native, methods=["POST"]),
                Route("/api/generate", self.native, methods=["POST"]),
                Route("/api/show", self.show, methods=["POST"]),
                Route("/api/tags", self.tags, methods=["GET"]),
                Route("/api/version", self.version, methods=["GET"]),
                Route("/{path:path}", self.unknown, methods=["GET", "POST"]),
            ]
        )
        return app


class FakeOllamaServer(FakeModelServer):
    def __init__(self) -> None:
        super().__init__(model=FakeOllama())

    def start(self) -> FakeOllamaServer:
        super().start()
        return self

    @property
    def root_url(self) -> str:
        """Ollama's own base URL (the native API); ``base_url`` is its ``/v1``."""
        return f"http://127.0.0.1:{self.port}"
