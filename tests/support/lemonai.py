"""The LemonAI-compatible API over ASGI: a client, a conversation, a run streamed and replayed
as the LemonAI page would."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from starlette.testclient import TestClient

from backend.app import create_app
from backend.config import Settings
from backend.llm.testing import ScriptedLLM
from tests.lemonai.client import sse_data

JSON = {"Content-Type": "application/json"}


@contextmanager
def lemon_client(settings: Settings, llm: ScriptedLLM) -> Iterator[TestClient]:
    with TestClient(create_app(settings, llm=llm), base_url="http://127.0.0.1") as client:
        yield client


def create(client: TestClient, content: str = "a goal", **headers: str) -> str:
    resp = client.post("/lemonai/api/conversation", json={"content": content}, headers=headers)
    assert resp.status_code == 200, resp.text
    return str(resp.json()["data"]["conversation_id"])


def stream_run(
    client: TestClient, body: dict[str, Any], headers: dict[str, str] | None = None
) -> tuple[list[str], list[str], Any]:
    """(raw data lines, decoded tokens, response headers) of one run."""
    raw: list[str] = []
    with client.stream(
        "POST",
        "/lemonai/api/agent/run",
        content=json.dumps(body),
        headers={**JSON, "Accept": "text/event-stream", **(headers or {})},
    ) as resp:
        assert resp.status_code == 200, resp.read()
        assert resp.headers["content-type"].startswith("text/event-stream")
        lines = list(resp.iter_lines())
        events = [ln for ln in lines if ln.startswith("event:")]
        raw = list(sse_data(lines))
        tokens = [base64.b64decode(d, validate=True).decode("utf-8") for d in raw]
        assert events == ["event: message"] * len(raw)
        return raw, tokens, resp.headers
