"""Live deltas in the UI (real Chromium, real server, the fake model over HTTP): text
appears as it is written, before its message is stored; a running command's output shows
while it runs; narration reads as the agent's words; skipped actions look skipped."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from playwright.sync_api import Page, expect

from tests.agent.scripts import finish, plan_reply, run, write
from tests.e2e.server import Server
from tests.fakellm import FakeModelServer
from tests.support.browser import ARTIFACTS
from tests.support.ui import model_called, send_goal

NewPage = Callable[..., Page]

ANSWER = (
    "Paris is the capital of France. It sits on the Seine and is home to about two "
    "million people, more than twelve million in its metropolitan area."
)
WAIT_FOR_GO = (
    "echo first; echo oops >&2; "
    "for i in $(seq 600); do [ -f go ] && break; sleep 0.05; done; echo second"
)


def test_answer_text_appears_before_the_message_is_stored(
    ui_server: Server, fake_model: FakeModelServer, new_page: NewPage
) -> None:
    # the model sends 4 of 10 chunks, then waits for the test: the answer is not stored yet
    fake_model.script(
        {
            "stage": "auto_reply",
            "content": ANSWER,
            "chunks": 10,
            "hold": "mid-answer",
            "hold_after": 4,
        }
    )
    page = new_page()
    page.goto(ui_server.url)
    send_goal(page, "What is the capital of France?", mode="chat")
    model_called(fake_model, "auto_reply")
    size = -(-len(ANSWER) // 10)
    live = page.locator('[data-testid="auto-reply"][data-live="1"]')
    expect(live).to_contain_text(ANSWER[: size * 4].split()[-2])
    expect(live).not_to_contain_text(ANSWER[-20:])
    expect(page.get_by_test_id("working")).to_be_visible()
    page.screenshot(path=str(ARTIFACTS / "live-answer.png"))
    fake_model.release("mid-answer")
    reply = page.get_by_test_id("auto-reply")
    expect(reply).to_have_count(1)
    expect(reply).not_to_have_attribute("data-live", "1")
    expect(reply).to_have_text(ANSWER)
    expect(page.get_by_test_id("working")).to_have_count(0)


def test_command_output_shows_while_the_command_runs(
    ui_server: Server, fake_model: FakeModelServer, new_page: NewPage, tmp_path: Path
) -> None:
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Print")},
        {
            "stage": "thinking",
            "content": "I'll print two lines, then wait.\n" + run(WAIT_FOR_GO) + finish("done"),
        },
    )
    page = new_page()
    page.goto(ui_server.url)
    send_goal(page, "print some lines", mode="agent")
    model_called(fake_model, "thinking")
    card = page.get_by_test_id("action-terminal_run")
    expect(card).to_have_attribute("data-state", "running")
    out = card.get_by_test_id("live-output")
    expect(out).to_contain_text("first")
    expect(out.locator(".stderr")).to_have_text("oops\n")
    expect(out).not_to_contain_text("second")
    narration = page.get_by_test_id("narration")
    expect(narration).to_have_text("I'll print two lines, then wait.")
    expect(narration).to_be_visible()  # the agent's words, not folded under "Thinking"
    page.screenshot(path=str(ARTIFACTS / "live-command.png"))
    (go,) = (tmp_path / "workspace").glob("*/Conversation_*")
    (go / "go").write_text("")
    expect(card).to_have_attribute("data-state", "success")
    expect(card.get_by_test_id("live-output")).to_have_count(0)
    expect(card).to_contain_text("second")
    expect(page.get_by_test_id("working")).to_have_count(0)


def test_skipped_actions_look_skipped(
    ui_server: Server, fake_model: FakeModelServer, new_page: NewPage
) -> None:
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Break")},
        {"stage": "thinking", "content": run("exit 3") + write("x.txt", "x\n") + finish("no")},
        {"stage": "thinking", "content": finish("Gave up on it.")},
    )
    page = new_page()
    page.goto(ui_server.url)
    send_goal(page, "run a failing command", mode="agent")
    expect(page.get_by_test_id("summary")).to_be_visible()
    failed = page.get_by_test_id("action-terminal_run")
    expect(failed).to_have_attribute("data-state", "failure")
    skipped = page.locator('[data-action="1"][data-state="skipped"]')
    expect(skipped).to_have_count(2)
    expect(skipped.nth(0)).to_have_attribute("data-testid", "action-write_code")
    expect(skipped.nth(1)).to_have_attribute("data-testid", "action-finish")
    expect(skipped.nth(1)).to_contain_text("Skipped")
    # only the real finish reads as a finish
    expect(page.get_by_test_id("finish")).to_have_count(1)
    expect(page.get_by_test_id("finish").locator(".md")).to_have_text("Gave up on it.")
    assert failed.evaluate("e => getComputedStyle(e).borderTopStyle") == "solid"
    assert skipped.nth(0).evaluate("e => getComputedStyle(e).borderTopStyle") == "dashed"


# prints, waits for `go`, prints again, waits for `go2`: the test decides when it goes on
TWO_STEPS = (
    "echo first; echo oops >&2; "
    "for i in $(seq 600); do [ -f go ] && break; sleep 0.05; done; echo second; "
    "for i in $(seq 600); do [ -f go2 ] && break; sleep 0.05; done; echo third"
)


def test_a_reload_mid_command_shows_the_output_so_far_then_the_rest_live(
    ui_server: Server, fake_model: FakeModelServer, new_page: NewPage, tmp_path: Path
) -> None:
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Print")},
        {"stage": "thinking", "content": run(TWO_STEPS) + finish("done")},
    )
    page = new_page()
    page.goto(ui_server.url)
    send_goal(page, "print some lines", mode="agent")
    card = page.get_by_test_id("action-terminal_run")
    expect(card.get_by_test_id("live-output")).to_contain_text("first")
    expect(card.get_by_test_id("live-output").locator(".stderr")).to_have_text("oops\n")
    page.reload()
    second_tab = new_page()
    second_tab.goto(page.url)
    (folder,) = (tmp_path / "workspace").glob("*/Conversation_*")
    for view in (page, second_tab):
        card = view.get_by_test_id("action-terminal_run")
        expect(card).to_have_attribute("data-state", "running")
        out = card.get_by_test_id("live-output")
        expect(out).to_contain_text("first")  # printed before the reload
        expect(out.locator(".stderr")).to_have_text("oops\n")
        assert out.inner_text().count("first") == 1
    page.screenshot(path=str(ARTIFACTS / "live-command-after-reload.png"))
    (folder / "go").write_text("")
    for view in (page, second_tab):
        card = view.get_by_test_id("action-terminal_run")
        out = card.get_by_test_id("live-output")
        expect(out).to_contain_text("second")  # live, while the command still runs
        expect(card).to_have_attribute("data-state", "running")
        text = out.inner_text()
        assert text.count("first") == 1 and text.count("second") == 1 and "oops" in text
    (folder / "go2").write_text("")
    for view in (page, second_tab):
        card = view.get_by_test_id("action-terminal_run")
        expect(card).to_have_attribute("data-state", "success")
        expect(card).to_contain_text("third")
