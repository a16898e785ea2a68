"""What is approved is what runs, in the web UI (real Chromium, the real server, the fake
model over HTTP), at desktop and phone widths: the approval card shows the whole command with
its whitespace and line count made visible, scrolls with a visible hint, says what an edit's
diff leaves out with the whole content one click away, and the answer names the digest of the
action shown. On a phone the approval choice is in the composer and the answers are big
enough for a finger; while a run is active Stop takes Send's place and the row keeps its
layout."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from playwright.sync_api import Locator, Page, expect

from tests.agent.scripts import finish, plan_reply, run, write
from tests.e2e.server import Server, wait_for
from tests.fakellm import FakeModelServer
from tests.support.browser import ARTIFACTS
from tests.support.ui import conversation_id, send_goal

NewPage = Callable[..., Page]

PADDED = "echo safe" + " " * 400 + "; touch HIDDEN1" + "\n" * 80 + "touch HIDDEN2"
PHONE = {"width": 390, "height": 844, "is_mobile": True, "has_touch": True}


def open_page(new_page: NewPage, phone: bool) -> Page:
    return new_page(**PHONE) if phone else new_page()


def ask_always(page: Page, server: Server, goal: str) -> Locator:
    page.goto(server.url)
    picker = page.get_by_label("Approval", exact=True)
    expect(picker).to_be_visible()
    picker.select_option("always")
    send_goal(page, goal, mode="agent")
    card = page.get_by_test_id("approval-card")
    expect(card).to_have_attribute("data-state", "pending")
    return card


def decisions(page: Page) -> list[dict[str, Any]]:
    bodies: list[dict[str, Any]] = []

    def seen(request: Any) -> None:
        if request.method == "POST" and "/approvals/" in request.url:
            bodies.append(json.loads(request.post_data or "{}"))

    page.on("request", seen)
    return bodies


def pending_item(server: Server, cid: str) -> dict[str, Any]:
    with server.client() as c:
        msgs = c.get(f"/api/conversations/{cid}/messages").json()
    (asked,) = [m for m in msgs if m["meta"]["action_type"] == "approval"][:1]
    item: dict[str, Any] = asked["meta"]["json"][0]
    return item


def shown_in(box: Locator, text: str) -> bool:
    """Whether the row holding ``text`` is inside the visible part of the scroll box."""
    found: bool = box.evaluate(
        """(box, text) => {
            const rows = [...box.querySelectorAll('.cmd-row')]
            const row = rows.find(r => r.textContent.includes(text))
            if (!row) return false
            const b = box.getBoundingClientRect(), r = row.getBoundingClientRect()
            return r.top >= b.top - 1 && r.bottom <= b.bottom + 1 && r.left >= b.left - 1
                && r.right <= b.right + 1 && r.width > 0
        }""",
        text,
    )
    return found


def in_workspace(tmp_path: Path, cid: str, name: str) -> list[Path]:
    return [p for p in (tmp_path / "workspace").rglob(name) if cid in str(p)]


def test_a_padded_command_is_shown_whole_and_the_answer_names_its_digest(
    ui_server: Server, fake_model: FakeModelServer, new_page: NewPage, tmp_path: Path
) -> None:
    for phone in (False, True):
        fake_model.script(
            {"stage": "planning", "content": plan_reply("Run it")},
            {"stage": "thinking", "content": run(PADDED)},
            {"stage": "thinking", "content": finish("ran")},
        )
        page = open_page(new_page, phone)
        sent = decisions(page)
        card = ask_always(page, ui_server, f"run it {phone}")
        cid = conversation_id(page)
        expect(card.get_by_test_id("approval-size")).to_contain_text("81 lines · 517 characters")
        expect(card.get_by_test_id("ws-mark")).to_have_text(["400 spaces"])
        expect(card.get_by_test_id("blank-lines")).to_have_text("79 empty lines")
        box = card.get_by_test_id("approval-scroll")
        for text in ("echo safe", "touch HIDDEN1", "touch HIDDEN2"):
            assert shown_in(box, text), (phone, text)
        expect(card.get_by_test_id("scroll-hint")).to_have_count(0)  # it all fits
        if phone:  # big enough for a finger
            for answer in ("approve", "reject", "approve-all"):
                size = card.get_by_test_id(answer).bounding_box()
                assert size and size["height"] >= 40, (answer, size)
        card.screenshot(path=str(ARTIFACTS / f"approval-padded-{'phone' if phone else 'wide'}.png"))
        card.get_by_test_id("approve").click()
        expect(card).to_have_attribute("data-state", "approved")
        expect(page.get_by_test_id("conversation-status")).to_have_attribute(
            "data-status", "completed"
        )
        assert sent == [{"decision": "approve", "digest": pending_item(ui_server, cid)["digest"]}]
        assert in_workspace(tmp_path, cid, "HIDDEN1") and in_workspace(tmp_path, cid, "HIDDEN2")


def test_a_long_command_scrolls_and_says_so_until_its_end_is_in_view(
    ui_server: Server, fake_model: FakeModelServer, new_page: NewPage
) -> None:
    command = "\n".join(f"echo step {i}" for i in range(1, 151))
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Run it")},
        {"stage": "thinking", "content": run(command)},
    )
    page = new_page(**PHONE)
    card = ask_always(page, ui_server, "run many steps")
    hint = card.get_by_test_id("scroll-hint")
    expect(hint).to_be_visible()
    expect(hint).to_contain_text("150 lines")
    box = card.get_by_test_id("approval-scroll")
    assert not shown_in(box, "echo step 150")
    box.evaluate("b => { b.scrollTop = b.scrollHeight }")
    expect(hint).to_have_count(0)
    wait_for(lambda: shown_in(box, "echo step 150"), what="the last line in view")


def test_a_cut_diff_says_what_it_left_out_and_the_whole_content_is_one_click_away(
    ui_server: Server, fake_model: FakeModelServer, new_page: NewPage, tmp_path: Path
) -> None:
    content = "".join(f"line {i}\n" for i in range(1, 40_001))
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Write it")},
        {"stage": "thinking", "content": write("big.txt", content)},
        {"stage": "thinking", "content": finish("written")},
    )
    page = new_page()
    sent = decisions(page)
    card = ask_always(page, ui_server, "write a big file")
    cid = conversation_id(page)
    cut = card.get_by_test_id("approval-cut")
    expect(cut).to_contain_text("Not all shown here.")
    expect(cut).to_contain_text("Cut after line")
    expect(cut).to_contain_text("more lines")
    full = card.get_by_test_id("approval-full")
    expect(full).to_have_count(0)
    show = card.get_by_test_id("approval-show-full")
    expect(show).to_contain_text("40,000 lines")
    show.click()
    expect(full).to_be_visible()
    assert full.text_content() == content
    card.get_by_test_id("approve").click()
    expect(page.get_by_test_id("conversation-status")).to_have_attribute("data-status", "completed")
    assert sent == [{"decision": "approve", "digest": pending_item(ui_server, cid)["digest"]}]
    (written,) = in_workspace(tmp_path, cid, "big.txt")
    assert written.read_text() == content


def centre(loc: Locator) -> float:
    box = loc.bounding_box()
    assert box is not None
    return box["y"] + box["height"] / 2


def test_the_composer_keeps_its_row_and_the_approval_choice_at_desktop_and_phone(
    ui_server: Server, fake_model: FakeModelServer, new_page: NewPage
) -> None:
    for phone in (False, True):
        fake_model.script(
            {"stage": "planning", "content": plan_reply("Mark")},
            {"stage": "thinking", "content": run("echo hi")},
        )
        page = open_page(new_page, phone)
        page.goto(ui_server.url)
        row = page.locator(".composer-row")
        idle = row.bounding_box()
        send = page.get_by_test_id("send")
        mode = page.get_by_test_id("mode")
        assert abs(centre(send) - centre(mode)) < 2, phone  # one row
        card = ask_always(page, ui_server, f"mark {phone}")
        expect(page.get_by_test_id("approval-mode")).to_be_visible()
        stop = page.get_by_test_id("stop")
        expect(stop).to_be_visible()
        expect(send).to_have_count(0)  # Stop is in its place
        assert abs(centre(stop) - centre(mode)) < 2, phone
        busy = row.bounding_box()
        assert idle and busy and abs(busy["height"] - idle["height"]) < 2, (idle, busy)
        size = page.viewport_size
        assert size is not None
        assert page.evaluate("document.documentElement.scrollWidth") <= size["width"]
        page.get_by_test_id("composer").screenshot(
            path=str(ARTIFACTS / f"composer-running-{'phone' if phone else 'wide'}.png")
        )
        stop.click()
        expect(card).to_have_attribute("data-state", "stopped")
