"""Checkpoints in Chromium: rewind (and redo) and fork from a step, the diff view, the share
dialog and the shared view, read-only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from playwright.sync_api import expect

from tests.agent.scripts import finish, plan_reply, write
from tests.e2e.server import Server, wait_for
from tests.fakellm import FakeModelServer
from tests.support.ui import send_goal


def files_of(tmp: Path, cid: str) -> dict[str, bytes]:
    (ws,) = (tmp / "workspace").glob(f"*/Conversation_{cid}")
    return {str(p.relative_to(ws)): p.read_bytes() for p in sorted(ws.rglob("*")) if p.is_file()}


def opened(page: Any) -> str:
    """The open conversation's id, read from the page itself (``page.url`` is only brought
    up to date while Playwright is called)."""
    href = str(page.evaluate("location.href"))
    assert "#/c/" in href, href
    return href.split("#/c/", 1)[1]


def script(fake: FakeModelServer) -> None:
    fake.script(
        {"stage": "planning", "content": plan_reply("Two files")},
        {"stage": "thinking", "content": write("a.txt", "alpha\n")},
        {"stage": "thinking", "content": write("b.txt", "beta\n")},
        {"stage": "thinking", "content": finish("both written")},
    )


def test_rewind_redo_fork_and_the_diff_view_from_a_step(
    tmp_path: Path, ui_server: Server, fake_model: FakeModelServer, new_page: Any
) -> None:
    script(fake_model)
    page = new_page()
    page.goto(ui_server.url)
    send_goal(page, "write two files", mode="agent")
    bars = page.get_by_test_id("checkpoint")
    expect(bars).to_have_count(3)  # two writes and the run's end
    cid = opened(page)
    first = bars.nth(0)
    first.get_by_test_id("checkpoint-compare").click()
    view = page.get_by_test_id("diff-view")
    expect(view).to_contain_text("b.txt")
    expect(view.locator(".diff-add")).to_contain_text(["+beta"])
    view.get_by_role("button", name="Close").click()
    expect(view).to_have_count(0)

    first.get_by_test_id("checkpoint-rewind").click()
    expect(page.get_by_test_id("rewound")).to_be_visible()
    wait_for(lambda: files_of(tmp_path, cid) == {"a.txt": b"alpha\n"}, what="the rewound files")
    expect(page.get_by_test_id("checkpoint")).to_have_count(1)
    page.get_by_test_id("redo").click()
    expect(page.get_by_test_id("rewound")).to_have_count(0)
    expect(page.get_by_test_id("checkpoint")).to_have_count(3)
    assert files_of(tmp_path, cid) == {"a.txt": b"alpha\n", "b.txt": b"beta\n"}

    page.get_by_test_id("checkpoint").nth(0).get_by_test_id("checkpoint-fork").click()
    expect(page.get_by_test_id("checkpoint")).to_have_count(1)
    forked = opened(page)
    assert forked != cid
    expect(page.get_by_test_id("checkpoint")).to_have_count(1)
    expect(page.get_by_test_id("working")).to_have_count(0)  # its run went on elsewhere
    assert files_of(tmp_path, forked) == {"a.txt": b"alpha\n"}
    assert files_of(tmp_path, cid) == {"a.txt": b"alpha\n", "b.txt": b"beta\n"}


def test_a_shared_link_opens_read_only(
    tmp_path: Path, ui_server: Server, fake_model: FakeModelServer, new_page: Any
) -> None:
    script(fake_model)
    page = new_page()
    page.goto(ui_server.url)
    send_goal(page, "write two files", mode="agent")
    expect(page.get_by_test_id("checkpoint")).to_have_count(3)
    page.get_by_test_id("open-share").click()
    page.get_by_test_id("share-make").click()
    url = page.get_by_test_id("share-url").input_value()
    assert "/shared/" in url
    visitor = new_page()
    visitor.goto(url)
    shared = visitor.get_by_test_id("shared-view")
    expect(shared.get_by_test_id("shared-goal")).to_have_text("write two files")
    expect(shared.get_by_test_id("shared-file")).to_have_text(["a.txt", "b.txt"])
    # read-only: no composer, no step buttons, nothing that changes the conversation
    expect(visitor.get_by_test_id("goal-input")).to_have_count(0)
    expect(visitor.get_by_test_id("checkpoint")).to_have_count(0)
    expect(visitor.get_by_role("button")).to_have_count(0)
    page.get_by_test_id("share-revoke").click()
    expect(page.get_by_test_id("share-note")).to_have_text("One link revoked.")
    visitor.reload()
    expect(visitor.get_by_test_id("shared-error")).to_be_visible()
