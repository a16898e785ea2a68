"""A reader who attaches while a command runs (a reload, a second tab, a reconnect with
Last-Event-ID) gets the output printed so far, then the rest live: nothing twice, nothing
lost, on the process that runs the command and on another replica (PostgreSQL, two
`planact serve`)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.agent.scripts import finish, plan_reply, run
from tests.e2e.server import Server, server_env
from tests.fakellm import FakeModelServer
from tests.pg import postgres_url, reset
from tests.sse_client import Event, iter_events

pytestmark = pytest.mark.e2e

# prints, then waits (bounded) for a file the test creates once every reader saw the start
PRINT_THEN_WAIT = (
    "printf 'first\\n'; printf 'oops\\n' >&2; printf 'more\\n'; "
    "for i in $(seq 600); do [ -f go ] && break; sleep 0.05; done; echo second"
)


class Reader:
    """One SSE stream of the run, read event by event."""

    def __init__(self, stack: contextlib.ExitStack, server: Server, rid: str, after: int) -> None:
        client = stack.enter_context(server.client())
        headers = {"Last-Event-ID": str(after)} if after else {}
        resp = stack.enter_context(
            client.stream("GET", f"/api/agent/runs/{rid}/events", headers=headers)
        )
        assert resp.status_code == 200
        self.events: Iterator[Event] = iter_events(resp.iter_lines())
        self.out = {"stdout": "", "stderr": ""}
        self.offsets: list[int] = []
        self.final: dict[str, Any] | None = None
        self.status = ""

    def step(self) -> None:
        ev = next(self.events)
        if ev.event == "end":
            self.status = ev.json["status"]
        elif ev.event == "delta" and "stream" in ev.json:
            assert self.final is None
            data = ev.json
            # contiguous: no overlap, no gap
            assert data.get("offset", len(self.out[data["stream"]])) == len(
                self.out[data["stream"]]
            )
            self.out[data["stream"]] += data["text"]
        elif (
            ev.event == "message"
            and ev.json["meta"]["action_type"] == "terminal_run"
            and ev.json["status"] != "running"
        ):
            self.final = ev.json

    def until(self, stdout: str, stderr: str) -> None:
        while not (self.out["stdout"] == stdout and self.out["stderr"] == stderr):
            assert not self.status and self.final is None, self.out
            self.step()

    def to_end(self) -> None:
        while not self.status:
            self.step()


def running_command_seq(server: Server, cid: str) -> int:
    with server.client() as c:
        msgs = c.get(f"/api/conversations/{cid}/messages").json()
    return int(max(m["seq"] for m in msgs if m["meta"]["action_type"] == "terminal_run"))


def test_readers_attached_mid_command_get_the_output_so_far_then_the_rest(
    tmp_path: Path, fake_model: FakeModelServer
) -> None:
    url = postgres_url()
    reset(url)
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Print")},
        {"stage": "thinking", "content": run(PRINT_THEN_WAIT) + finish("printed")},
    )
    env = server_env(tmp_path, fake_model.base_url, DATABASE_URL=url)
    a = Server(tmp_path, env).start()
    b = Server(tmp_path, env).start()
    try:
        with a.client() as ca:
            r = ca.post(
                "/api/agent/run",
                json={"goal": "print lines", "mode": "agent"},
                headers={"Accept": "application/json"},
            )
            assert r.status_code == 202
            cid, rid = r.json()["conversation_id"], r.json()["run_id"]
        so_far = ("first\nmore\n", "oops\n")
        with contextlib.ExitStack() as stack:
            # the run executes on A: a reader there from the start sees the command print
            first = Reader(stack, a, rid, 0)
            first.until(*so_far)
            seq = running_command_seq(a, cid)
            # then readers attach: a reload on the other replica, a reconnect there with
            # Last-Event-ID past the command's `running` message, a second tab on A
            late = [
                Reader(stack, b, rid, 0),
                Reader(stack, b, rid, seq),
                Reader(stack, a, rid, seq),
            ]
            for reader in late:
                reader.until(*so_far)  # before the command goes on: the output so far
            (tmp_path / "workspace" / "user_1" / f"Conversation_{cid}" / "go").write_text("")
            for reader in [first, *late]:
                reader.to_end()
                assert reader.status == "completed"
                assert reader.out == {"stdout": "first\nmore\nsecond\n", "stderr": "oops\n"}
                assert reader.final is not None and reader.final["status"] == "success"
    finally:
        b.stop()
        a.stop()
