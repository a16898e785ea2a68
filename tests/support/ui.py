"""Driving the UI in Chromium: sending a goal, reading the conversation, scripted runs the
browser tests share."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from playwright.sync_api import Page, expect

from tests.agent.scripts import finish, plan_reply, run, write
from tests.e2e.server import Server, server_env, wait_for
from tests.fakellm import FakeModelServer
from tests.support.browser import DIST

HELLO = 'print("hello from planact")  # <b> & "quotes" — ünïcode\n'


def send_goal(page: Page, goal: str, mode: str | None = None) -> None:
    if mode:
        page.get_by_test_id("mode").select_option(mode)
    box = page.get_by_test_id("goal-input")
    box.fill(goal)
    box.press("Enter")


def conversation_id(page: Page) -> str:
    wait_for(lambda: "#/c/" in page.url, what="the conversation id in the URL")
    return page.url.split("#/c/", 1)[1]


def workspace_file(tmp_path: Path, cid: str, rel: str) -> Path:
    hits = list((tmp_path / "workspace").glob(f"*/Conversation_{cid}/{rel}"))
    assert len(hits) == 1, hits
    return hits[0]


def script_two_tasks(fake: FakeModelServer, summary: str = "## Done\nWrote **hello.py**.") -> None:
    fake.script(
        {
            "stage": "planning",
            "content": plan_reply("Write the script", "Run it", prose="Two steps."),
        },
        {
            "stage": "thinking",
            "content": "<think>First the file.</think>\n"
            + write("hello.py", HELLO)
            + finish("Wrote hello.py."),
        },
        {"stage": "thinking", "content": run("python3 hello.py") + finish("It printed hello.")},
        {"stage": "summary", "content": summary},
    )


def model_called(fake: FakeModelServer, stage: str) -> None:
    """Wait (bounded) for the model call of ``stage``: a cold server may take a while."""
    wait_for(
        lambda: any(c["stage"] == stage for c in fake.model.calls),
        timeout=120,
        what=f"the {stage} model call",
    )


NewPage = Callable[..., Page]


@contextmanager
def server_with(tmp_path: Path, fake: FakeModelServer, **env: str) -> Iterator[Server]:
    values = server_env(tmp_path, fake.base_url, FRONTEND_DIST=str(DIST))
    values.update(env)
    for key in [k for k, v in values.items() if v == ""]:
        del values[key]
    server = Server(tmp_path, values).start()
    try:
        yield server
    finally:
        server.stop()


# appends, so a second run of the command would show as a second line
MARK = "echo ran >> marker.txt"


def script_marker_task(fake: FakeModelServer, *after: dict[str, str]) -> None:
    fake.script(
        {"stage": "planning", "content": plan_reply("Make the marker")},
        {"stage": "thinking", "content": "I'll make it.\n" + run(MARK) + finish("Made it.")},
        *after,
    )


def start_waiting(page: Page, server: Server, goal: str = "make a marker") -> None:
    page.goto(server.url)
    picker = page.get_by_label("Approval", exact=True)
    expect(picker).to_be_visible()
    picker.select_option("always")
    send_goal(page, goal, mode="agent")
