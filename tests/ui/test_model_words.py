"""What the model said when it was no plan or action, in the browser (real Chromium, real
server, the fake model over HTTP): a refusal reads as the model's answer, a format problem
as a reply the agent could not use, with what it wrote; the two look different."""

from __future__ import annotations

from collections.abc import Callable

from playwright.sync_api import Page, expect

from tests.agent.scripts import finish, plan_reply
from tests.e2e.server import Server
from tests.fakellm import FakeModelServer
from tests.support.browser import ARTIFACTS
from tests.support.ui import send_goal

NewPage = Callable[..., Page]

REFUSAL = "I can't help with deleting other people's files: that would harm them."
BROKEN_ACTION = "Let me run it.\n<terminal_run><cwd>.</cwd></terminal_run>"


def test_a_refusal_and_a_format_problem_are_shown_and_look_different(
    ui_server: Server, fake_model: FakeModelServer, new_page: NewPage
) -> None:
    fake_model.script(
        {"stage": "planning", "content": REFUSAL},
        {"stage": "planning", "content": plan_reply("Look", prose="I'll look.")},
        {"stage": "thinking", "content": BROKEN_ACTION},
        {"stage": "thinking", "content": finish("Looked.")},
    )
    page = new_page()
    page.goto(ui_server.url)
    send_goal(page, "tidy the shared folder", mode="agent")
    replies = page.get_by_test_id("auto-reply")
    expect(replies).to_have_count(2)
    expect(replies.nth(0)).to_have_text(REFUSAL)  # the refusal reads as the model's answer
    expect(replies.nth(1)).to_have_text("I'll look.")
    shown = page.get_by_test_id("unusable-reply")
    expect(shown).to_have_count(1)
    expect(shown).to_be_visible()  # not folded away under "Thinking"
    expect(shown).to_contain_text(
        "The model's reply could not be used as an action: `terminal_run` was missing command."
    )
    expect(shown.get_by_test_id("unusable-words")).to_have_text(BROKEN_ACTION)
    expect(shown).not_to_contain_text("Allowed actions")  # the lesson is for the model
    expect(page.get_by_test_id("run-error")).to_have_count(0)
    page.screenshot(path=str(ARTIFACTS / "model-words.png"))
