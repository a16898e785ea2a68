"""Helpers for runs that wait for a person, black-box over HTTP (tests/e2e/test_approvals*)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from tests.e2e.cluster import messages
from tests.e2e.server import Server, wait_for

MARKER_COMMAND = "echo ran >> marker.log"


def pending(server: Server, cid: str, kind: str = "approval") -> dict[str, Any]:
    """The run's wait message once it is stored (waited on, not slept for)."""

    def find() -> dict[str, Any] | None:
        msgs = messages(server, cid)
        closed = {m["uuid"] for m in msgs if m["status"] != "running"}
        for m in msgs:
            if m["meta"]["action_type"] == kind and m["uuid"] not in closed:
                return m
        return None

    found: dict[str, Any] = wait_for(find, timeout=60, what=f"the {kind} message")
    return found


def decide(server: Server, rid: str, uuid: str, body: Any, **kw: Any) -> httpx.Response:
    with server.client() as c:
        return c.post(f"/api/agent/runs/{rid}/approvals/{uuid}", json=body, **kw)


def answer(server: Server, rid: str, uuid: str, body: Any, **kw: Any) -> httpx.Response:
    with server.client() as c:
        return c.post(f"/api/agent/runs/{rid}/answers/{uuid}", json=body, **kw)


def markers(tmp: Path, cid: str) -> list[str]:
    """The marker files' contents in the conversation's workspace."""
    return [p.read_text() for p in (tmp / "workspace").rglob("marker.log") if cid in str(p)]


def conversation(server: Server, cid: str) -> dict[str, Any]:
    with server.client() as c:
        got: dict[str, Any] = c.get(f"/api/conversations/{cid}").json()
        return got


def listed_status(server: Server, cid: str) -> str:
    with server.client() as c:
        for conv in c.get("/api/conversations").json():
            if conv["conversation_id"] == cid:
                return str(conv["status"])
    return "missing"


def finals(msgs: list[dict[str, Any]], uuid: str) -> list[dict[str, Any]]:
    return [m for m in msgs if m["uuid"] == uuid and m["status"] != "running"]


def seen_by_model(fake_model: Any, stage: str = "thinking") -> str:
    """Everything the model was sent in its last call of ``stage``."""
    calls = [c for c in fake_model.model.calls if c["stage"] == stage]
    return "\n".join(str(m.get("content", "")) for m in calls[-1]["messages"])
