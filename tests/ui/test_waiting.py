"""Runs that wait for a person, in the web UI (real Chromium, the real server, the fake model
over HTTP): the approval card holds the command back until Approve, shows a rejection and its
reason, survives a reload with working buttons; the question card's answer box; the waiting
mark in the sidebar and the page title."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from playwright.sync_api import Page, expect

from tests.agent.scripts import finish, plan_reply
from tests.e2e.server import Server, wait_for
from tests.fakellm import FakeModelServer
from tests.support.browser import ARTIFACTS
from tests.support.ui import MARK, script_marker_task, send_goal, start_waiting

NewPage = Callable[..., Page]


def markers(tmp_path: Path) -> list[str]:
    """The marker file's contents, one per marker file anywhere in the workspaces."""
    return [p.read_text() for p in (tmp_path / "workspace").rglob("marker.txt")]


def model_saw(fake: FakeModelServer, text: str) -> bool:
    return any(text in json.dumps(c["messages"]) for c in fake.model.calls)


def test_a_command_waits_for_approve_then_runs_once(
    ui_server: Server, fake_model: FakeModelServer, new_page: NewPage, tmp_path: Path
) -> None:
    script_marker_task(fake_model)
    page = new_page()
    start_waiting(page, ui_server)
    card = page.get_by_test_id("approval-card")
    expect(card).to_have_attribute("data-state", "pending")
    expect(card.get_by_test_id("approval-command")).to_have_text(f"$ {MARK}")
    expect(card.get_by_test_id("approval-class")).to_have_text("terminal")
    # parked: marked waiting in the live view, the header, the sidebar and the title
    expect(page.get_by_test_id("waiting")).to_be_visible()
    expect(page.get_by_test_id("working")).to_have_count(0)
    expect(page.get_by_test_id("conversation-status")).to_have_attribute("data-status", "waiting")
    item = page.locator(".conv-item.active .badge")
    expect(item).to_have_attribute("data-status", "waiting")
    expect(page).to_have_title("⏸ Waiting for you · make a marker — planact")
    assert markers(tmp_path) == []  # the command has not run
    page.screenshot(path=str(ARTIFACTS / "waiting-approval.png"))

    approve = card.get_by_test_id("approve")
    approve.dblclick()  # a double click answers once
    expect(card).to_have_attribute("data-state", "approved")
    expect(card.get_by_test_id("approval-outcome")).to_contain_text("Approved")
    action = page.get_by_test_id("action-terminal_run")
    expect(action).to_have_attribute("data-state", "success")
    expect(page.get_by_test_id("working")).to_have_count(0)
    expect(page.get_by_test_id("conversation-status")).to_have_attribute("data-status", "completed")
    assert markers(tmp_path) == ["ran\n"]  # once
    expect(page).to_have_title("make a marker — planact")
    expect(page.get_by_test_id("approval-error")).to_have_count(0)
    expect(page.get_by_role("alert")).to_have_count(0)


def test_a_rejection_and_its_reason_show_on_the_card_and_reach_the_model(
    ui_server: Server, fake_model: FakeModelServer, new_page: NewPage, tmp_path: Path
) -> None:
    reason = "not in this folder, please"
    script_marker_task(fake_model, {"stage": "thinking", "content": finish("Left it alone.")})
    page = new_page()
    start_waiting(page, ui_server)
    card = page.get_by_test_id("approval-card")
    expect(card).to_have_attribute("data-state", "pending")
    card.get_by_test_id("reject").click()
    box = card.get_by_test_id("reject-reason")
    expect(box).to_be_focused()
    box.fill(reason)
    box.press("Enter")
    expect(card).to_have_attribute("data-state", "rejected")
    expect(card.get_by_test_id("approval-reason")).to_have_text(reason)
    expect(page.get_by_test_id("conversation-status")).to_have_attribute("data-status", "completed")
    wait_for(lambda: model_saw(fake_model, reason), what="the reason in a model call")
    assert markers(tmp_path) == []
    page.reload()  # the outcome is stored, not only in this page
    card = page.get_by_test_id("approval-card")
    expect(card).to_have_attribute("data-state", "rejected")
    expect(card.get_by_test_id("approval-reason")).to_have_text(reason)
    expect(card.get_by_test_id("approval-command")).to_have_text(f"$ {MARK}")
    expect(card.get_by_test_id("approve")).to_have_count(0)


def test_a_reload_while_waiting_shows_the_card_again_with_working_buttons(
    ui_server: Server, fake_model: FakeModelServer, new_page: NewPage, tmp_path: Path
) -> None:
    script_marker_task(fake_model)
    page = new_page()
    start_waiting(page, ui_server)
    expect(page.get_by_test_id("approval-card")).to_have_attribute("data-state", "pending")
    page.reload()
    card = page.get_by_test_id("approval-card")
    expect(card).to_have_attribute("data-state", "pending")
    expect(card.get_by_test_id("approval-command")).to_have_text(f"$ {MARK}")
    expect(page.get_by_label("Approval", exact=True)).to_have_value("always")  # the run's mode
    expect(page.get_by_test_id("waiting")).to_be_visible()
    expect(page).to_have_title("⏸ Waiting for you · make a marker — planact")
    assert markers(tmp_path) == []
    card.get_by_test_id("approve").click()
    expect(card).to_have_attribute("data-state", "approved")
    expect(page.get_by_test_id("action-terminal_run")).to_have_attribute("data-state", "success")
    expect(page.get_by_test_id("conversation-status")).to_have_attribute("data-status", "completed")
    assert markers(tmp_path) == ["ran\n"]


def test_a_question_is_answered_in_the_answer_box(
    ui_server: Server, fake_model: FakeModelServer, new_page: NewPage
) -> None:
    question = "Which port should the server listen on?"
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Pick the port")},
        {
            "stage": "thinking",
            "content": f"<ask_user><question>{question}</question></ask_user>",
        },
        {"stage": "thinking", "content": finish("The port is 8080.")},
    )
    page = new_page()
    page.goto(ui_server.url)
    send_goal(page, "set up the server", mode="agent")
    card = page.get_by_test_id("question-card")
    expect(card).to_have_attribute("data-state", "pending")
    expect(card.get_by_test_id("question-text")).to_have_text(question)
    expect(page.locator(".conv-item.active .badge")).to_have_attribute("data-status", "waiting")
    expect(page).to_have_title("⏸ Waiting for you · set up the server — planact")
    box = card.get_by_test_id("answer-input")
    box.fill("8080")
    box.press("Enter")
    expect(card).to_have_attribute("data-state", "answered")
    expect(card.get_by_test_id("answer")).to_have_text("8080")
    expect(card.get_by_test_id("question-text")).to_have_text(question)
    expect(page.get_by_test_id("conversation-status")).to_have_attribute("data-status", "completed")
    wait_for(lambda: model_saw(fake_model, "8080"), what="the answer in a model call")
    expect(page.get_by_test_id("finish")).to_contain_text("The port is 8080.")


def test_stop_while_waiting_ends_the_run_and_the_card_says_stopped(
    ui_server: Server, fake_model: FakeModelServer, new_page: NewPage, tmp_path: Path
) -> None:
    script_marker_task(fake_model)
    page = new_page()
    start_waiting(page, ui_server)
    card = page.get_by_test_id("approval-card")
    expect(card).to_have_attribute("data-state", "pending")
    page.get_by_test_id("stop").click()
    expect(card).to_have_attribute("data-state", "stopped")
    expect(card.get_by_test_id("approval-outcome")).to_contain_text("Stopped")
    expect(card.get_by_test_id("approve")).to_have_count(0)
    expect(page.get_by_test_id("conversation-status")).to_have_attribute("data-status", "stopped")
    expect(page.get_by_test_id("waiting")).to_have_count(0)
    expect(page).to_have_title("make a marker — planact")
    assert markers(tmp_path) == []
