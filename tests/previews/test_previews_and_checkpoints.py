"""Previews and checkpoints: a rewind stops the conversation's previews (their service ends,
its processes gone), and a shared link never carries a preview's address (its token)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.server import wait_for
from tests.fakellm import FakeModelServer
from tests.support.previews import (
    PreviewServer,
    processes_with,
    start_app,
    start_preview_server,
)

pytestmark = [pytest.mark.e2e, pytest.mark.bwrap]


@pytest.fixture
def preview_server(tmp_path: Path, fake_model: FakeModelServer) -> Iterator[PreviewServer]:
    yield from start_preview_server("local-bwrap", tmp_path, fake_model)


def test_a_rewind_stops_the_previews_and_a_share_leaves_them_out(
    preview_server: PreviewServer, fake_model: FakeModelServer
) -> None:
    marker = f"rewind-{uuid.uuid4().hex[:8]}"
    cid, url = start_app(preview_server, fake_model, marker)
    assert processes_with(marker)
    server = preview_server.server
    with server.client() as c:
        token = c.post(f"/api/conversations/{cid}/share").json()["token"]
        cps = c.get(f"/api/conversations/{cid}/checkpoints").json()
        assert [p["state"] for p in c.get(f"/api/conversations/{cid}/previews").json()] == ["ready"]
        resp = c.post(f"/api/conversations/{cid}/rewind", json={"seq": cps[0]["seq"]})
        assert resp.status_code == 200, resp.text
        states = [p["state"] for p in c.get(f"/api/conversations/{cid}/previews").json()]
        assert states == ["stopped"]
    wait_for(lambda: not processes_with(marker), what="the service's processes to end")
    assert httpx.get(url, timeout=10).status_code != 200
    with httpx.Client(base_url=server.url, timeout=30) as anon:
        shared = anon.get(f"/api/shared/{token}")
        assert shared.status_code == 200
    body = shared.text
    preview_token = url.rstrip("/").rsplit("/", 1)[-1]
    assert url not in body and preview_token not in body
    kinds = [m["meta"]["action_type"] for m in shared.json()["messages"]]
    assert "preview" in kinds
