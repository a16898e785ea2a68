"""Action cards show the work (real Chromium, real server, the fake model over HTTP): a
command as a terminal shows it (exit code badge, stderr distinct, no "stdout:" scaffolding)
live and after a reload; a written file highlighted and folded; an edit as a diff; a run
stopped mid-command reads as stopped in the card, the bar and the sidebar."""

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

WAIT_FOR_GO = "for i in $(seq 600); do [ -f go ] && break; sleep 0.05; done"
COMMAND = f"echo first; echo oops >&2; {WAIT_FOR_GO}; echo second; exit 3"
PROGRAM = "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(10))  # 30 lines


def edit(path: str, old: str, new: str) -> str:
    return (
        f"<edit_file><path>{path}</path><old_str>{old}</old_str>"
        f"<new_str>{new}</new_str></edit_file>"
    )


def color(locator: object) -> str:
    return str(locator.evaluate("e => getComputedStyle(e).color"))  # type: ignore[attr-defined]


def go(tmp_path: Path) -> None:
    (ws,) = (tmp_path / "workspace").glob("*/Conversation_*")
    (ws / "go").write_text("")


def test_a_command_card_shows_its_exit_code_and_stderr_live_and_after_a_reload(
    ui_server: Server, fake_model: FakeModelServer, new_page: NewPage, tmp_path: Path
) -> None:
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Print")},
        {"stage": "thinking", "content": run(COMMAND) + finish("done")},
        {"stage": "thinking", "content": finish("It exited with 3.")},
    )
    page = new_page()
    page.goto(ui_server.url)
    send_goal(page, "print some lines", mode="agent")
    model_called(fake_model, "thinking")
    card = page.get_by_test_id("action-terminal_run")
    expect(card).to_have_attribute("data-state", "running")
    expect(card.get_by_test_id("command")).to_contain_text("echo first")
    live = card.get_by_test_id("live-output")
    expect(live.locator(".stderr")).to_have_text("oops\n")
    assert color(live.locator(".stderr")) != color(live)
    expect(card.get_by_test_id("exit-badge")).to_have_count(0)  # not ended yet
    go(tmp_path)
    expect(page.get_by_test_id("summary")).to_be_visible()

    def check_ended() -> None:
        card = page.get_by_test_id("action-terminal_run")
        expect(card).to_have_attribute("data-state", "failure")
        badge = card.get_by_test_id("exit-badge")
        expect(badge).to_have_text("exit 3")
        expect(badge).to_have_attribute("data-tone", "bad")
        expect(card.get_by_test_id("stdout")).to_have_text("first\nsecond\n")
        stderr = card.get_by_test_id("stderr")
        expect(stderr).to_have_text("oops\n")
        assert color(stderr) != color(card.get_by_test_id("stdout"))
        for scaffolding in ("stdout:", "stderr:", "(empty)", "Exit code"):
            expect(card).not_to_contain_text(scaffolding)

    check_ended()
    page.reload()
    check_ended()


def test_a_command_that_succeeds_gets_a_green_zero_badge(
    ui_server: Server, fake_model: FakeModelServer, new_page: NewPage
) -> None:
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Quiet")},
        {"stage": "thinking", "content": run("true") + finish("done")},
    )
    page = new_page()
    page.goto(ui_server.url)
    send_goal(page, "run true", mode="agent")
    expect(page.get_by_test_id("summary")).to_be_visible()
    card = page.get_by_test_id("action-terminal_run")
    badge = card.get_by_test_id("exit-badge")
    expect(badge).to_have_text("exit 0")
    expect(badge).to_have_attribute("data-tone", "ok")
    assert color(badge) != color(page.locator("body"))
    expect(card.get_by_test_id("no-output")).to_have_text("no output")


def test_a_write_card_shows_the_file_highlighted_and_folded_and_an_edit_card_its_diff(
    ui_server: Server, fake_model: FakeModelServer, new_page: NewPage
) -> None:
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Write", "Edit")},
        {"stage": "thinking", "content": write("app.py", PROGRAM) + finish("Wrote it.")},
        {
            "stage": "thinking",
            "content": edit("app.py", "return x + 4", "return x * 4") + finish("Edited."),
        },
        {"stage": "summary", "content": "Wrote and edited app.py."},
    )
    page = new_page()
    page.goto(ui_server.url)
    send_goal(page, "write a program and change it", mode="agent")
    expect(page.get_by_test_id("summary")).to_be_visible()
    code = page.get_by_test_id("action-write_code").get_by_test_id("code")
    expect(code).to_have_attribute("data-folded", "1")
    expect(code).to_contain_text("def f0(x):")
    expect(code).not_to_contain_text("def f9(x):")  # line 28: folded away
    expect(code.locator(".hljs-keyword").first).to_have_text("def")
    unfold = code.get_by_test_id("code-unfold")
    expect(unfold).to_have_text("Show all 30 lines")
    page.screenshot(path=str(ARTIFACTS / "cards-write-edit.png"))
    unfold.click()
    expect(code).to_have_attribute("data-folded", "0")
    expect(code).to_contain_text("def f9(x):")
    diff = page.get_by_test_id("action-edit_file").get_by_test_id("diff")
    expect(diff.locator('[data-kind="del"]')).to_contain_text(["-    return x + 4"])
    expect(diff.locator('[data-kind="add"]')).to_contain_text(["+    return x * 4"])
    expect(diff.locator('[data-kind="hunk"]')).to_contain_text(["@@ -11,7 +11,7 @@"])  # line 14
    assert color(diff.locator('[data-kind="add"]')) != color(diff.locator('[data-kind="del"]'))
    expect(page.get_by_test_id("action-edit_file")).not_to_contain_text("edited successfully")


def test_a_run_stopped_mid_command_reads_as_stopped_in_card_bar_and_sidebar(
    ui_server: Server, fake_model: FakeModelServer, new_page: NewPage
) -> None:
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Done first", "Wait")},
        {"stage": "thinking", "content": run("echo ready") + finish("ready")},
        {"stage": "thinking", "content": run(f"echo waiting; {WAIT_FOR_GO}") + finish("no")},
    )
    page = new_page()
    page.goto(ui_server.url)
    send_goal(page, "wait for a file", mode="agent")
    card = page.get_by_test_id("action-terminal_run").nth(1)
    expect(card.get_by_test_id("live-output")).to_contain_text("waiting")
    page.get_by_test_id("stop").click()
    expect(page.get_by_test_id("conversation-status")).to_have_text("stopped")

    def check_stopped() -> None:
        card = page.get_by_test_id("action-terminal_run").nth(1)
        expect(card).to_have_attribute("data-state", "stopped")
        expect(card.get_by_test_id("exit-badge")).to_have_text("interrupted")
        assert card.evaluate("e => getComputedStyle(e).borderTopStyle") == "dashed"
        # one task done, one stopped: half the bar green, the rest grey, nothing red
        bar = page.get_by_role("progressbar")
        expect(bar).to_have_attribute("aria-valuenow", "50")
        expect(page.locator('.progress-bar[data-part="failed"]')).to_have_count(0)
        expect(page.locator('.progress-bar[data-part="stopped"]')).to_have_count(1)
        expect(page.get_by_test_id("progress-text")).to_have_text("1 of 2 tasks done · 1 stopped")
        # the sidebar and the header say stopped in the bar's grey, not a failure's red
        # nor a warning's amber
        grey = page.locator('.progress-bar[data-part="stopped"]').evaluate(
            "e => getComputedStyle(e).backgroundColor"
        )
        for badge in (
            page.locator(".conv-open .badge"),
            page.get_by_test_id("conversation-status"),
        ):
            expect(badge).to_have_attribute("data-status", "stopped")
            assert color(badge) == grey

    check_stopped()
    page.screenshot(path=str(ARTIFACTS / "cards-stopped.png"))
    page.reload()
    check_stopped()


def test_a_failed_runs_bar_does_not_read_green(
    ui_server: Server, fake_model: FakeModelServer, new_page: NewPage
) -> None:
    fake_model.script(
        {"stage": "planning", "content": plan_reply("One", "Two", "Three")},
        {"stage": "thinking", "content": run("echo one") + finish("one")},
        {"stage": "thinking", "content": run("echo two") + finish("two")},
        {"stage": "thinking", "status": 400, "content": "the model refused"},
    )
    page = new_page()
    page.goto(ui_server.url)
    send_goal(page, "three steps", mode="agent")
    expect(page.get_by_test_id("conversation-status")).to_have_text("failed")
    expect(page.get_by_test_id("progress-text")).to_have_text("2 of 3 tasks done · 1 failed")
    bar = page.get_by_role("progressbar")
    expect(bar).to_have_attribute("data-run", "failed")
    done = page.locator('.progress-bar[data-part="completed"]')
    green = page.locator(".task-icon.completed").first
    # two thirds of the bar are the tasks done, but not in the green of a success
    assert done.evaluate("e => getComputedStyle(e).backgroundColor") != color(green)
    assert page.locator(".conv-open .badge").get_attribute("data-status") == "failed"
    page.screenshot(path=str(ARTIFACTS / "cards-failed.png"))
