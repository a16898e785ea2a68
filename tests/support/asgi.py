"""The app over ASGI (Starlette's TestClient) with a scripted model: a client whose every answer
is checked against the OpenAPI document, and a run posted and read to its end."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from starlette.testclient import TestClient

from backend.app import create_app
from backend.config import Settings
from backend.llm.testing import ScriptedLLM
from tests.openapi_check import ResponseCheck
from tests.sse_client import collect


@contextmanager
def client_for(settings: Settings, llm: ScriptedLLM) -> Iterator[TestClient]:
    app = create_app(settings, llm=llm)
    with TestClient(app) as client:
        # every answer checked against the app's OpenAPI document (tests/openapi_check.py)
        ResponseCheck(client.get("/api/openapi.json").json()).install(client)
        yield client


def post_run(client: TestClient, body: dict[str, Any]) -> tuple[list[dict[str, Any]], Any, Any]:
    with client.stream("POST", "/api/agent/run", json=body) as resp:
        assert resp.status_code == 200
        assert resp.headers["content-type"].startswith("text/event-stream")
        messages, end = collect(resp.iter_lines())
        return messages, end, resp.headers


def kinds(messages: list[dict[str, Any]]) -> list[str]:
    return [m["meta"]["action_type"] for m in messages]
