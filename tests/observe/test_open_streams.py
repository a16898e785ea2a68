"""planact_open_streams counts the run streams open in the process, black-box: a real
`planact serve`, a run held in a model call while two readers follow it."""

from __future__ import annotations

import threading
from pathlib import Path

import httpx
import pytest

from tests.agent.scripts import finish, plan_reply
from tests.e2e.cluster import follow, start_json
from tests.e2e.server import running_server, wait_for
from tests.fakellm import FakeModelServer

pytestmark = pytest.mark.e2e


def open_streams(url: str) -> float:
    for line in httpx.get(f"{url}/metrics", timeout=30).text.splitlines():
        if line.startswith("planact_open_streams "):
            return float(line.split()[1])
    raise AssertionError("no planact_open_streams")


def test_open_streams_rise_while_runs_are_followed_and_fall_when_they_end(
    tmp_path: Path, fake_model: FakeModelServer
) -> None:
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Wait")},
        {"stage": "thinking", "content": finish("done"), "hold": "held"},
    )
    with running_server(tmp_path, fake_model.base_url) as server:
        assert open_streams(server.url) == 0
        ids = start_json(server, {"goal": "wait", "mode": "agent"}).json()
        wait_for(lambda: any(c["stage"] == "thinking" for c in fake_model.model.calls))
        ends: list[object] = []
        readers = [
            threading.Thread(target=lambda: ends.append(follow(server, ids["run_id"])[1]))
            for _ in range(2)
        ]
        for reader in readers:
            reader.start()
        wait_for(lambda: open_streams(server.url) == 2, what="two open streams")
        fake_model.release("held")
        for reader in readers:
            reader.join(60)
        assert len(ends) == 2
        wait_for(lambda: open_streams(server.url) == 0, what="the streams closed")
