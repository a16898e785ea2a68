"""In real Chromium: each run names its model and a reload keeps the conversation's model in
the picker; the phone layout (readable title, a three-line goal box, labelled selects); the
sidebar date on one line; the zip offered only when there are files; attaching before a goal
keeps the composer and leaves no "Untitled" conversations behind."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from playwright.sync_api import Page, expect

from tests.agent.scripts import finish, plan_reply, run
from tests.e2e.server import Server, wait_for
from tests.fakellm import FakeModelServer
from tests.support.browser import ARTIFACTS
from tests.support.ui import NewPage, conversation_id, script_two_tasks, send_goal, server_with

TWO_MODELS = "openai/fake-model,openai/other-model"


def test_each_run_shows_its_model_and_a_reload_keeps_it_in_the_picker(
    fake_model: FakeModelServer, new_page: NewPage, tmp_path: Path
) -> None:
    with server_with(tmp_path, fake_model, LLM_MODELS=TWO_MODELS) as server:
        page = new_page()
        page.goto(server.url)
        fake_model.script({"stage": "auto_reply", "content": "First."})
        send_goal(page, "answer with the default", mode="chat")
        expect(page.get_by_test_id("auto-reply")).to_contain_text("First.")
        models = page.get_by_test_id("run-model")
        expect(models).to_have_count(1)
        expect(models.first).to_contain_text("openai/fake-model")  # the server default

        page.get_by_test_id("model-picker").select_option("openai/other-model")
        fake_model.script({"stage": "auto_reply", "content": "Second."})
        send_goal(page, "answer with the other one")
        expect(page.get_by_test_id("auto-reply").nth(1)).to_contain_text("Second.")
        expect(models).to_have_count(2)
        expect(models.nth(1)).to_contain_text("openai/other-model")

        page.reload()
        expect(page.get_by_test_id("auto-reply")).to_have_count(2)
        expect(page.get_by_test_id("model-picker")).to_have_value("openai/other-model")
        expect(models.nth(0)).to_contain_text("openai/fake-model")
        expect(models.nth(1)).to_contain_text("openai/other-model")

        fake_model.script({"stage": "check", "content": "42"})
        page.get_by_test_id("check-model").click()
        result = page.get_by_test_id("check-result")
        expect(result).to_contain_text("The model answered in")
        expect(result).to_contain_text("openai/other-model")
        assert fake_model.model.calls[-1]["model"] == "other-model"
        fake_model.script({"stage": "check", "status": 401, "content": "Incorrect API key"})
        page.get_by_test_id("model-picker").select_option("openai/fake-model")
        page.get_by_test_id("check-model").click()
        expect(result).to_contain_text("openai/fake-model")
        expect(result).to_contain_text("Incorrect API key")


def line_box(locator: Any) -> dict[str, float]:
    """The element's content height and its line height, in CSS pixels."""
    return dict(
        locator.evaluate(
            """e => { const s = getComputedStyle(e); const fs = parseFloat(s.fontSize);
            const lh = s.lineHeight === 'normal' ? fs * 1.2 : parseFloat(s.lineHeight);
            const pad = parseFloat(s.paddingTop) + parseFloat(s.paddingBottom);
            return {height: e.getBoundingClientRect().height, content: e.clientHeight - pad,
                    line: lh} }"""
        )
    )


def test_phone_title_stays_readable_goal_box_has_three_lines_and_selects_are_named(
    fake_model: FakeModelServer, new_page: NewPage, tmp_path: Path
) -> None:
    with server_with(tmp_path, fake_model, LLM_MODELS=TWO_MODELS) as server:
        page = new_page(390, 844, is_mobile=True, has_touch=True)
        page.goto(server.url)
        box = page.get_by_test_id("goal-input")
        measured = line_box(box)
        assert measured["content"] >= 2.9 * measured["line"], measured  # it was 1.5 lines

        selects = page.locator("select").all()
        assert len(selects) >= 2  # mode and model (and runtime when docker is offered)
        for select in selects:
            expect(select).to_have_accessible_name(re.compile(r"\w"))
        expect(page.get_by_role("combobox", name="Mode", exact=True)).to_have_count(1)
        expect(page.get_by_role("combobox", name="Model", exact=True)).to_have_count(1)

        fake_model.script({"stage": "auto_reply", "content": "Cold and wet."})
        send_goal(page, "Weather in Oslo today", mode="chat")
        expect(page.get_by_test_id("auto-reply")).to_contain_text("Cold and wet.")
        title = page.locator(".pane-title h1")
        expect(title).to_have_text("Weather in Oslo today")
        expect(page.get_by_test_id("conversation-status")).to_have_text("completed")
        # the whole title shows, not one letter beside the token count
        size = title.evaluate("h => [h.scrollWidth, h.clientWidth]")
        assert size[0] <= size[1] and size[1] > 120, size
        assert page.evaluate("document.documentElement.scrollWidth") <= 390


def test_sidebar_date_stays_on_one_line_wide_and_on_a_phone(
    ui_server: Server, fake_model: FakeModelServer, new_page: NewPage
) -> None:
    fake_model.script({"stage": "auto_reply", "content": "Hello."})
    page = new_page()
    page.goto(ui_server.url)
    send_goal(page, "say hello", mode="chat")
    expect(page.get_by_test_id("conversation-status")).to_have_text("completed")
    # beside the "completed" badge, the date wrapped onto a second line
    expect(page.get_by_test_id("conversation-list").locator(".badge").first).to_have_text(
        "completed"
    )
    date = page.get_by_test_id("conversation-list").locator(".conv-meta .muted").first
    expect(date).to_be_visible()
    wide = line_box(date)
    assert abs(wide["height"] - wide["line"]) < 1, wide
    assert date.evaluate("e => e.scrollWidth <= e.clientWidth")  # whole, not cut short

    phone = new_page(390, 844, is_mobile=True, has_touch=True)
    phone.goto(ui_server.url)
    phone.get_by_role("button", name="Conversations").click()
    date = phone.get_by_test_id("conversation-list").locator(".conv-meta .muted").first
    expect(date).to_be_visible()
    narrow = line_box(date)
    assert abs(narrow["height"] - narrow["line"]) < 1, narrow
    assert date.evaluate("e => e.scrollWidth <= e.clientWidth")


def test_download_all_is_offered_only_once_the_conversation_has_files(
    fake_model: FakeModelServer, new_page: NewPage, tmp_path: Path
) -> None:
    with server_with(tmp_path, fake_model, LLM_MODELS=TWO_MODELS) as server:
        check_download_all(server, fake_model, new_page, tmp_path)


def check_download_all(
    ui_server: Server, fake_model: FakeModelServer, new_page: NewPage, tmp_path: Path
) -> None:
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Look")},
        {"stage": "thinking", "content": run("echo nothing written") + finish("Looked.")},
    )
    page = new_page()
    page.goto(ui_server.url)
    send_goal(page, "look around", mode="agent")
    expect(page.get_by_test_id("summary")).to_be_visible()
    expect(page.get_by_test_id("conversation-status")).to_have_text("completed")
    cid = conversation_id(page)
    with ui_server.client() as c:
        assert c.get(f"/api/conversations/{cid}/files").json() == []
    zip_link = page.get_by_test_id("download-all")
    expect(zip_link).to_have_count(0)
    expect(page.get_by_test_id("summary-download-all")).to_have_count(0)
    page.reload()
    expect(page.get_by_test_id("summary")).to_be_visible()
    expect(zip_link).to_have_count(0)

    script_two_tasks(fake_model)
    page.get_by_test_id("model-picker").select_option("openai/other-model")
    send_goal(page, "write hello.py and run it")
    expect(page.get_by_test_id("summary")).to_have_count(2)
    expect(zip_link).to_be_visible()
    expect(page.get_by_test_id("summary-download-all")).to_have_count(1)
    expect(page.get_by_test_id("conversation-status")).to_have_text("completed")
    expect(page.get_by_test_id("run-model").nth(1)).to_contain_text("openai/other-model")
    # docs/screenshot-run.png is a copy of it: a finished run, its model, files and the zip
    ARTIFACTS.mkdir(exist_ok=True)
    page.set_viewport_size({"width": 1280, "height": 1100})
    page.get_by_test_id("goal").nth(1).scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "run-finished-models.png"))

    # a new conversation with only an attachment offers it too
    page.get_by_test_id("new-conversation").click()
    expect(zip_link).to_have_count(0)
    notes = tmp_path / "notes.txt"
    notes.write_text("n\n")
    page.get_by_test_id("file-input").set_input_files(str(notes))
    expect(page.get_by_test_id("attachment")).to_have_attribute("data-state", "done")
    expect(zip_link).to_be_visible()


def listed_titles(page: Page) -> list[str]:
    return [
        t.strip()
        for t in page.get_by_test_id("conversation-list").locator(".conv-title").all_inner_texts()
    ]


def test_attaching_before_a_goal_keeps_the_composer_and_leaves_no_untitled_behind(
    ui_server: Server, fake_model: FakeModelServer, new_page: NewPage, tmp_path: Path
) -> None:
    data = tmp_path / "data.csv"
    data.write_text("a,b\n1,2\n")
    page = new_page()
    page.goto(ui_server.url)
    welcome = page.get_by_text("What should the agent do?")
    expect(welcome).to_be_visible()
    box = page.get_by_test_id("goal-input")
    box.fill("chart data.csv")
    chips = page.get_by_test_id("attachment")
    page.get_by_test_id("file-input").set_input_files(str(data))
    expect(chips).to_have_attribute("data-state", "done")
    draft = conversation_id(page)
    # what the person saw stays: the welcome, the box with their words, the chip
    expect(welcome).to_be_visible()
    expect(box).to_have_value("chart data.csv")
    expect(box).to_be_visible()

    # every chip removed: the conversation made for them goes too
    chips.first.get_by_role("button", name="Remove data.csv from the list").click()
    expect(chips).to_have_count(0)
    wait_for(lambda: "#/c/" not in page.url, what="the draft left")
    with ui_server.client() as c:
        wait_for(
            lambda: c.get(f"/api/conversations/{draft}").status_code == 404,
            what="the abandoned draft deleted",
        )
    expect(box).to_have_value("chart data.csv")
    expect(page.get_by_test_id("conversation-list").locator("li")).to_have_count(0)

    # attached, then a new conversation started without sending: nothing left behind
    page.get_by_test_id("file-input").set_input_files(str(data))
    expect(chips).to_have_attribute("data-state", "done")
    second = conversation_id(page)
    page.get_by_test_id("new-conversation").click()
    expect(chips).to_have_count(0)
    with ui_server.client() as c:
        wait_for(
            lambda: c.get(f"/api/conversations/{second}").status_code == 404,
            what="the second draft deleted",
        )
    expect(page.get_by_test_id("conversation-list").locator("li")).to_have_count(0)

    # the tab reloaded in between (the page forgot it made the draft): still not listed
    page.get_by_test_id("file-input").set_input_files(str(data))
    expect(chips).to_have_attribute("data-state", "done")
    third = conversation_id(page)
    page.reload()
    expect(page.get_by_test_id("conversation-list").locator("li")).to_have_count(1)
    page.get_by_test_id("new-conversation").click()
    wait_for(lambda: "#/c/" not in page.url, what="a new conversation")
    page.reload()
    expect(welcome).to_be_visible()
    expect(page.get_by_test_id("conversation-list").locator("li")).to_have_count(0)
    with ui_server.client() as c:
        assert c.get(f"/api/conversations/{third}").status_code == 200  # kept, not listed

    # a goal sent after attaching keeps the conversation, titled by its goal
    fake_model.script({"stage": "auto_reply", "content": "Done."})
    page.get_by_test_id("file-input").set_input_files(str(data))
    expect(chips).to_have_attribute("data-state", "done")
    send_goal(page, "describe data.csv", mode="chat")
    expect(page.get_by_test_id("auto-reply")).to_contain_text("Done.")
    page.get_by_test_id("new-conversation").click()
    wait_for(lambda: listed_titles(page) == ["describe data.csv"], what="the sent one listed")
