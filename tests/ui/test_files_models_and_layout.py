"""In real Chromium: attach and drop files, pick and check the model, the first-run
screen, rename and search, retry, copy buttons, workspace links in Markdown previews, the
phone layout and the sticky sidebar head."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.sync_api import Page, expect

from tests.agent.scripts import finish, plan_reply, run, write
from tests.e2e.server import Server, wait_for
from tests.fakellm import FakeModelServer
from tests.support.browser import ARTIFACTS
from tests.support.ui import NewPage, conversation_id, send_goal, server_with, workspace_file


def drop_file(page: Page, name: str, text: str) -> None:
    data = page.evaluate_handle(
        "([name, text]) => { const dt = new DataTransfer();"
        " dt.items.add(new File([text], name, {type: 'text/plain'})); return dt }",
        [name, text],
    )
    composer = page.get_by_test_id("composer")
    composer.dispatch_event("dragenter", {"dataTransfer": data})
    expect(page.locator(".drop-hint")).to_be_visible()
    composer.dispatch_event("drop", {"dataTransfer": data})


def test_attach_and_drop_files_then_the_run_sees_them(
    ui_server: Server, fake_model: FakeModelServer, new_page: NewPage, tmp_path: Path
) -> None:
    csv = tmp_path / "data.csv"
    csv.write_text("city,temp\nOslo,3\nRome,18\n")
    page = new_page()
    page.goto(ui_server.url)
    page.get_by_test_id("file-input").set_input_files(str(csv))
    chips = page.get_by_test_id("attachment")
    expect(chips).to_have_count(1)
    expect(chips.first).to_have_attribute("data-state", "done")
    expect(chips.first).to_contain_text("data.csv")
    cid = conversation_id(page)  # an empty conversation was made for the files
    assert workspace_file(tmp_path, cid, "data.csv").read_text() == csv.read_text()

    drop_file(page, "notes.txt", "dropped by hand\n")
    expect(chips).to_have_count(2)
    expect(chips.nth(1)).to_have_attribute("data-state", "done")
    expect(page.locator(".drop-hint")).to_have_count(0)
    assert workspace_file(tmp_path, cid, "notes.txt").read_text() == "dropped by hand\n"
    page.get_by_test_id("goal-input").fill("analyse data.csv and chart it")
    ARTIFACTS.mkdir(exist_ok=True)  # docs/screenshot-attach.png is a copy of it
    page.get_by_test_id("composer").screenshot(path=str(ARTIFACTS / "attach.png"))

    fake_model.script(
        {
            "stage": "planning",
            "content": plan_reply("Count", prose="I'll count the rows of data.csv."),
        },
        {"stage": "thinking", "content": run("wc -l < data.csv") + finish("3 lines.")},
    )
    send_goal(page, "analyse data.csv and chart it", mode="agent")
    expect(page.get_by_test_id("summary")).to_be_visible()
    expect(chips).to_have_count(0)  # sent with the goal
    assert conversation_id(page) == cid
    planning = next(c for c in fake_model.model.calls if c["stage"] == "planning")
    assert "- data.csv" in planning["messages"][0]["content"]
    assert "- notes.txt" in planning["messages"][0]["content"]
    # the person's own words name the conversation, not the planner's sentence
    expect(page.locator(".pane-title h1")).to_have_text("analyse data.csv and chart it")
    expect(page.get_by_test_id("conversation-list")).to_contain_text(
        "analyse data.csv and chart it"
    )
    expect(page.get_by_test_id("conversation-list")).not_to_contain_text("Count the rows")


def test_an_upload_the_server_refuses_shows_why(
    fake_model: FakeModelServer, new_page: NewPage, tmp_path: Path
) -> None:
    big = tmp_path / "big.bin"
    big.write_bytes(b"x" * 30_000)
    with server_with(tmp_path, fake_model, WORKSPACE_MAX_MB="0.02") as server:
        page = new_page()
        page.goto(server.url)
        page.get_by_test_id("file-input").set_input_files(str(big))
        chip = page.get_by_test_id("attachment")
        expect(chip).to_have_attribute("data-state", "failed")
        expect(chip).to_contain_text("WORKSPACE_MAX_MB")


def test_one_oversized_file_in_a_drop_keeps_the_small_ones(
    fake_model: FakeModelServer, new_page: NewPage, tmp_path: Path
) -> None:
    small = [tmp_path / "a.txt", tmp_path / "b.txt"]
    for path in small:
        path.write_text(f"{path.name}\n")
    big = tmp_path / "big.bin"
    big.write_bytes(b"x" * 80_000)
    with server_with(tmp_path, fake_model, UPLOAD_MAX_MB="0.05") as server:
        page = new_page()
        page.goto(server.url)
        page.get_by_test_id("file-input").set_input_files([str(small[0]), str(big), str(small[1])])
        chips = page.get_by_test_id("attachment")
        expect(chips).to_have_count(3)
        refused = chips.filter(has_text="big.bin")
        expect(refused).to_have_attribute("data-state", "failed")
        expect(refused).to_contain_text("upload limit")
        for path in small:
            expect(chips.filter(has_text=path.name)).to_have_attribute("data-state", "done")
        cid = conversation_id(page)
        for path in small:
            assert workspace_file(tmp_path, cid, path.name).read_text() == f"{path.name}\n"
        assert not list((tmp_path / "workspace").glob(f"*/Conversation_{cid}/big.bin"))


def test_pick_and_check_the_model(
    fake_model: FakeModelServer, new_page: NewPage, tmp_path: Path
) -> None:
    with server_with(
        tmp_path, fake_model, LLM_MODELS="openai/fake-model,openai/other-model"
    ) as server:
        page = new_page()
        page.goto(server.url)
        picker = page.get_by_test_id("model-picker")
        expect(picker).to_have_value("openai/fake-model")
        fake_model.script({"stage": "check", "content": "42"})
        page.get_by_test_id("check-model").click()
        result = page.get_by_test_id("check-result")
        expect(result).to_contain_text("The model answered in")

        picker.select_option("openai/other-model")
        expect(result).to_have_count(0)
        fake_model.script({"stage": "check", "status": 401, "content": "Incorrect API key"})
        page.get_by_test_id("check-model").click()
        expect(result).to_contain_text("check LLM_API_KEY")
        expect(result).to_contain_text("Incorrect API key")

        fake_model.script({"stage": "auto_reply", "content": "Hi there."})
        send_goal(page, "say hi", mode="chat")
        expect(page.get_by_test_id("auto-reply")).to_contain_text("Hi there.")
        models = [c["model"] for c in fake_model.model.calls]
        assert models == ["fake-model", "other-model", "other-model"], models


def test_first_run_screen_explains_env_and_restart(
    fake_model: FakeModelServer, new_page: NewPage, tmp_path: Path
) -> None:
    with server_with(tmp_path, fake_model, LLM_MODEL="", LLM_MODELS="") as server:
        page = new_page()
        page.goto(server.url)
        screen = page.get_by_test_id("first-run")
        expect(screen).to_be_visible()
        expect(screen).to_contain_text(".env")
        expect(screen).to_contain_text("LLM_MODEL=")
        expect(screen).to_contain_text("restart planact")
        expect(page.get_by_test_id("check-model")).to_have_count(0)


def test_rename_and_search_conversations(ui_server: Server, new_page: NewPage) -> None:
    with ui_server.client() as c:
        for title in ("Sales report 2026", "Weather chart", "Sales forecast"):
            assert c.post("/api/conversations", json={"title": title}).status_code == 201
    page = new_page()
    page.goto(ui_server.url)
    items = page.get_by_test_id("conversation-list").locator("li")
    expect(items).to_have_count(3)
    search = page.get_by_test_id("conversation-search")
    search.fill("sales")
    expect(items).to_have_count(2)
    search.fill("weather")
    expect(items).to_have_count(1)
    items.first.get_by_test_id("rename").click()
    box = page.get_by_test_id("rename-input")
    expect(box).to_be_focused()
    box.fill("Rain in Oslo")
    box.press("Enter")
    expect(items.first).to_contain_text("Rain in Oslo")
    search.fill("")
    expect(items).to_have_count(3)
    search.fill("rain")
    expect(items).to_have_count(1)
    with ui_server.client() as c:
        titles = [x["title"] for x in c.get("/api/conversations").json()]
    assert "Rain in Oslo" in titles and "Weather chart" not in titles
    # Escape leaves the title as it was
    items.first.get_by_test_id("rename").click()
    page.get_by_test_id("rename-input").fill("nope")
    page.get_by_test_id("rename-input").press("Escape")
    expect(items.first).to_contain_text("Rain in Oslo")


def test_retry_a_failed_run(
    ui_server: Server, fake_model: FakeModelServer, new_page: NewPage
) -> None:
    fake_model.script(*({"stage": "planning", "content": "no plan, sorry"},) * 3)
    page = new_page()
    page.goto(ui_server.url)
    send_goal(page, "write a.txt", mode="agent")
    expect(page.get_by_test_id("run-error")).to_be_visible()
    cid = conversation_id(page)
    retry = page.get_by_test_id("retry")
    expect(retry).to_have_count(1)
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Write")},
        {"stage": "thinking", "content": write("a.txt", "a\n") + finish("Wrote a.txt.")},
    )
    retry.click()
    turns = page.locator("article.turn")
    expect(turns).to_have_count(2)
    expect(turns.nth(1)).to_have_attribute("data-status", "completed")
    expect(turns.nth(1).get_by_test_id("goal")).to_have_text("write a.txt")
    expect(retry).to_have_count(0)  # the newest run completed
    assert conversation_id(page) == cid
    with ui_server.client() as c:
        runs = c.get(f"/api/conversations/{cid}").json()["runs"]
    assert [(r["goal"], r["status"]) for r in runs] == [
        ("write a.txt", "failed"),
        ("write a.txt", "completed"),
    ]


def test_copy_buttons_on_code_commands_outputs_and_answers(
    ui_server: Server, fake_model: FakeModelServer, new_page: NewPage
) -> None:
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Run")},
        {"stage": "thinking", "content": run("echo copied-output") + finish("Done.")},
    )
    page = new_page(permissions=["clipboard-read", "clipboard-write"])
    page.goto(ui_server.url)
    send_goal(page, "echo something", mode="agent")
    card = page.get_by_test_id("action-terminal_run")
    expect(card).to_have_attribute("data-state", "success")

    def copied() -> str:
        return str(page.evaluate("navigator.clipboard.readText()"))

    card.get_by_role("button", name="Copy command").click()
    wait_for(lambda: copied() == "echo copied-output", what="the command on the clipboard")
    card.get_by_role("button", name="Copy output").click()
    wait_for(lambda: "copied-output" in copied() and "echo" not in copied(), what="the output")

    fake_model.script(
        {"stage": "auto_reply", "content": "Use this:\n\n```python\nprint('from a block')\n```\n"}
    )
    send_goal(page, "show code", mode="chat")
    answer = page.get_by_test_id("auto-reply").nth(1)
    expect(answer).to_contain_text("from a block")
    answer.get_by_test_id("copy-code").click()
    wait_for(lambda: copied() == "print('from a block')\n", what="the code block")
    expect(answer.get_by_test_id("copy-code")).to_have_attribute("data-state", "copied")
    expect(answer).to_have_text(re.compile(r"^Use this:\s*print\('from a block'\)\s*$"))
    answer.get_by_role("button", name="Copy answer").click()
    wait_for(lambda: copied().startswith("Use this:"), what="the answer")


def test_markdown_preview_resolves_relative_images_and_links(
    ui_server: Server, fake_model: FakeModelServer, new_page: NewPage
) -> None:
    svg = (
        '<svg xmlns="http://www.w3.org/2000/svg" width="40" height="20">'
        '<rect width="40" height="20" fill="teal"/></svg>\n'
    )
    readme = "# Report\n\n![chart](img/chart.svg)\n\nSee [the data](../data.csv).\n"
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Write")},
        {
            "stage": "thinking",
            "content": write("report/img/chart.svg", svg)
            + write("report/README.md", readme)
            + write("data.csv", "a,b\n1,2\n")
            + finish("Wrote the report."),
        },
    )
    page = new_page()
    page.goto(ui_server.url)
    send_goal(page, "write a report", mode="agent")
    summary = page.get_by_test_id("summary")
    expect(summary).to_be_visible()
    summary.get_by_test_id("file-preview").filter(has_text="README.md").click()
    md = page.get_by_test_id("markdown-preview")
    img = md.locator("img")
    expect(img).to_have_attribute("data-workspace-path", "report/img/chart.svg")
    wait_for(
        lambda: img.evaluate("i => i.complete && i.naturalWidth") == 40, what="the image loads"
    )
    md.get_by_role("link", name="the data").click()
    expect(page.locator("#preview-title")).to_have_text("data.csv")
    expect(page.get_by_test_id("text-preview")).to_contain_text("a,b")


WIDE_TABLE = "| name | description | value |\n|---|---|---|\n" + "".join(
    f"| item{i} | an_extraordinarily_long_identifier_that_would_break_{i} | {i * 1000} |\n"
    for i in range(4)
)


def test_phone_layout_tables_scroll_and_header_and_composer_stay_small(
    ui_server: Server, fake_model: FakeModelServer, new_page: NewPage
) -> None:
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Tabulate", "Check")},
        {"stage": "thinking", "content": write("t.md", WIDE_TABLE) + finish("Wrote t.md.")},
        {"stage": "thinking", "content": run("wc -l t.md") + finish("Checked.")},
        {"stage": "summary", "content": "## Figures\n\n" + WIDE_TABLE},
    )
    page = new_page(390, 844, is_mobile=True, has_touch=True)
    page.goto(ui_server.url)
    send_goal(page, "tabulate the figures", mode="agent")
    summary = page.get_by_test_id("summary")
    # the summary streams in live and re-renders on every delta: measure the final one
    expect(page.get_by_test_id("conversation-status")).to_have_text("completed")
    expect(summary).to_contain_text("item3")
    table = summary.locator("table")
    widths = table.evaluate("t => [t.scrollWidth, t.clientWidth]")
    assert widths[0] > widths[1], widths  # it scrolls sideways
    cell = table.locator("td").nth(1)
    assert cell.evaluate("c => getComputedStyle(c).whiteSpace") == "nowrap"
    line_height = cell.evaluate("c => c.getBoundingClientRect().height")
    assert line_height < 40, line_height  # one line, no word broken in pieces
    assert page.evaluate("document.documentElement.scrollWidth") <= 390  # no page sideways
    top = page.locator(".topbar").bounding_box()
    head = page.locator(".pane-head").bounding_box()
    composer = page.get_by_test_id("composer").bounding_box()
    assert top and head and composer
    chrome = top["height"] + head["height"] + composer["height"]
    assert chrome / 844 < 0.25, (top, head, composer)  # it was 37 %
    ARTIFACTS.mkdir(exist_ok=True)  # docs/screenshot-phone.png is a copy of it
    summary.scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "phone-table.png"))


def test_sidebar_head_stays_put_while_the_list_scrolls(
    ui_server: Server, new_page: NewPage
) -> None:
    with ui_server.client() as c:
        for i in range(40):
            c.post("/api/conversations", json={"title": f"Conversation number {i}"})
    page = new_page(1280, 600)
    page.goto(ui_server.url)
    expect(page.get_by_test_id("conversation-list").locator("li")).to_have_count(40)
    head = page.locator(".sidebar-head")
    before = head.bounding_box()
    page.locator(".sidebar").evaluate("s => { s.scrollTop = s.scrollHeight }")
    wait_for(lambda: page.locator(".sidebar").evaluate("s => s.scrollTop") > 100, what="scroll")
    after = head.bounding_box()
    assert before and after and after["y"] == before["y"] == 0
    expect(page.get_by_test_id("conversation-search")).to_be_in_viewport()


def test_token_counter_never_reads_0_and_follows_the_run(
    ui_server: Server, fake_model: FakeModelServer, new_page: NewPage
) -> None:
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Write"), "hold": "plan"},
        {"stage": "thinking", "content": write("a.txt", "a\n") + finish("Done."), "hold": "think"},
    )
    page = new_page()
    page.goto(ui_server.url)
    detail = re.compile(r"/api/conversations/[0-9a-f]{32}$")
    with page.expect_response(lambda r: bool(detail.search(r.url))):
        send_goal(page, "write a.txt", mode="agent")
    expect(page.get_by_test_id("goal")).to_be_visible()
    usage = page.get_by_test_id("usage")
    # the conversation's totals (0 so far) arrived: let the page render them, then look
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    assert usage.count() == 0, usage.inner_text()  # nothing spent yet: no "0 tokens"
    fake_model.release("plan")
    expect(page.get_by_test_id("auto-reply")).to_be_visible()
    # the planning call's tokens show while the thinking call is still out
    expect(usage).to_contain_text("tokens")
    assert not usage.inner_text().startswith("0 ")
    expect(page.get_by_test_id("working")).to_be_visible()
    fake_model.release("think")
    expect(page.get_by_test_id("summary")).to_be_visible()


def test_token_counter_sets_the_latest_runs_tokens_against_the_run_budget(
    ui_server: Server, fake_model: FakeModelServer, new_page: NewPage
) -> None:
    one_run = (
        {"stage": "planning", "content": plan_reply("Write")},
        {"stage": "thinking", "content": write("a.txt", "a\n") + finish("Done.")},
    )
    fake_model.script(*one_run, *one_run)
    page = new_page()
    page.goto(ui_server.url)
    send_goal(page, "write a.txt", mode="agent")
    expect(page.get_by_test_id("conversation-status")).to_have_text("completed")
    send_goal(page, "write a.txt again", mode="agent")
    expect(page.get_by_test_id("summary")).to_have_count(2)
    expect(page.get_by_test_id("conversation-status")).to_have_text("completed")
    cid = conversation_id(page)
    with ui_server.client() as c:
        detail = c.get(f"/api/conversations/{cid}").json()
    first, second = (run["total_tokens"] for run in detail["runs"])
    assert first > 0 and second > 0 and detail["total_tokens"] == first + second
    usage = page.get_by_test_id("usage")
    # the second run's own tokens against the per-run budget, not the conversation's sum
    expect(usage).to_contain_text(f"{second:,} / ")
    expect(usage).to_contain_text("tokens this run")
    assert f"{first + second:,} /" not in usage.inner_text()
    assert f"this conversation: {first + second:,} tokens" in (usage.get_attribute("title") or "")
