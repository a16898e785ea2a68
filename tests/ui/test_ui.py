"""The web UI in real Chromium against the real server and the fake model."""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import Dialog, Page, Route, expect

from backend.runtime.registry import builtin_runtimes
from tests.agent.scripts import finish, plan_reply, write
from tests.e2e.server import Server, server_env, wait_for
from tests.fakellm import FakeModelServer
from tests.support.browser import ARTIFACTS, DIST
from tests.support.ui import HELLO, conversation_id, script_two_tasks, send_goal, workspace_file

NewPage = Callable[..., Page]


def test_goal_shows_plan_actions_and_summary(
    ui_server: Server, fake_model: FakeModelServer, new_page: NewPage, tmp_path: Path
) -> None:
    script_two_tasks(fake_model)
    page = new_page()
    page.goto(ui_server.url)
    expect(page.get_by_test_id("send")).to_be_disabled()
    send_goal(page, "Write a python script that says hello")

    expect(page.get_by_test_id("goal")).to_have_text("Write a python script that says hello")
    expect(page.get_by_test_id("auto-reply")).to_contain_text("Two steps.")
    summary = page.get_by_test_id("summary")
    expect(summary).to_be_visible()

    tasks = page.get_by_test_id("task")
    expect(tasks).to_have_count(2)
    expect(tasks.nth(0)).to_have_attribute("data-status", "completed")
    expect(tasks.nth(1)).to_have_attribute("data-status", "completed")
    expect(tasks.nth(0)).to_contain_text("Write the script")
    expect(page.get_by_test_id("progress-text")).to_have_text("2 of 2 tasks done")
    expect(page.get_by_role("progressbar")).to_have_attribute("aria-valuenow", "100")

    write_card = page.get_by_test_id("action-write_code")
    expect(write_card).to_have_count(1)
    expect(write_card).to_have_attribute("data-state", "success")
    expect(write_card.get_by_test_id("file-link")).to_have_text("hello.py")
    term = page.get_by_test_id("action-terminal_run")
    expect(term.get_by_test_id("command")).to_have_text("$ python3 hello.py")
    expect(term).to_contain_text("hello from planact")
    thinking = page.get_by_test_id("thinking")
    expect(thinking).to_have_count(1)
    expect(thinking).not_to_have_attribute("open", "")
    expect(page.get_by_test_id("finish")).to_have_count(2)
    expect(page.get_by_test_id("finish").nth(1).locator(".md")).to_have_text("It printed hello.")

    expect(summary.locator(".md h2")).to_have_text("Done")
    expect(summary.locator(".md strong")).to_have_text("hello.py")
    file_row = summary.get_by_test_id("file")
    expect(file_row).to_have_count(1)
    expect(file_row).to_contain_text("hello.py")
    expect(file_row).to_contain_text(f"{len(HELLO.encode())} B")

    # run over: no stop button, status and cost in the header, the conversation in the URL
    expect(page.get_by_test_id("stop")).to_have_count(0)
    expect(page.get_by_test_id("working")).to_have_count(0)
    expect(page.get_by_test_id("conversation-status")).to_have_text("completed")
    expect(page.get_by_test_id("usage")).to_contain_text("tokens")
    cid = conversation_id(page)
    with ui_server.client() as c:
        conv = c.get(f"/api/conversations/{cid}").json()
    # the run's spend against its budget (RUN_MAX_TOKENS, carried by the question message)
    run_tokens = conv["runs"][-1]["total_tokens"]
    assert run_tokens == conv["total_tokens"] > 0  # one run: the conversation's whole spend
    expect(page.get_by_test_id("usage")).to_contain_text(
        f"{run_tokens:,} / 2,000,000 tokens this run"
    )
    items = page.get_by_test_id("conversation-list").locator("li")
    expect(items).to_have_count(1)
    expect(items.first).to_contain_text("completed")

    ARTIFACTS.mkdir(exist_ok=True)
    page.set_viewport_size({"width": 1280, "height": 1280})  # the whole run in one picture
    page.get_by_test_id("goal").scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "run-finished.png"))
    # the same finished run, on a phone and in dark mode
    phone = new_page(390, 800, color_scheme="dark", is_mobile=True, has_touch=True)
    phone.goto(f"{ui_server.url}/#/c/{cid}")
    expect(phone.get_by_test_id("summary")).to_be_visible()
    phone.screenshot(path=str(ARTIFACTS / "run-finished-phone-dark.png"), full_page=True)
    phone.get_by_role("button", name="Conversations").click()
    expect(phone.get_by_test_id("conversation-list")).to_be_visible()
    phone.screenshot(path=str(ARTIFACTS / "phone-menu.png"))


def test_downloads_match_the_workspace_bytes(
    ui_server: Server, fake_model: FakeModelServer, new_page: NewPage, tmp_path: Path
) -> None:
    script_two_tasks(fake_model)
    page = new_page()
    page.goto(ui_server.url)
    send_goal(page, "Write a python script that says hello")
    summary = page.get_by_test_id("summary")
    expect(summary).to_be_visible()
    cid = conversation_id(page)
    on_disk = workspace_file(tmp_path, cid, "hello.py").read_bytes()
    assert on_disk == HELLO.encode()

    with page.expect_download() as info:
        summary.get_by_test_id("file-download").click()
    download = info.value
    assert download.suggested_filename == "hello.py"
    assert Path(download.path()).read_bytes() == on_disk

    with page.expect_download() as info:
        summary.get_by_test_id("summary-download-all").click()
    with zipfile.ZipFile(io.BytesIO(Path(info.value.path()).read_bytes())) as zf:
        names = {n.rsplit("/", 1)[-1]: n for n in zf.namelist()}
        assert "hello.py" in names
        assert zf.read(names["hello.py"]) == on_disk


SVG = (
    '<svg xmlns="http://www.w3.org/2000/svg" width="40" height="20">'
    '<rect width="40" height="20" fill="#4f46e5"/></svg>\n'
)
EVIL_HTML = (
    "<!doctype html><h1 id=t>Static page</h1>"
    "<script>new Image().src='/api/health?pwned=iframe-script';"
    "document.getElementById('t').textContent='PWNED'</script>\n"
)


def test_file_previews_text_code_markdown_image_and_sandboxed_html(
    ui_server: Server, fake_model: FakeModelServer, new_page: NewPage
) -> None:
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Write files")},
        {
            "stage": "thinking",
            "content": write("app.py", "def main():\n    return 42\n")
            + write("docs/notes.md", "# Notes\n\n- one\n- **two**\n")
            + write("logo.svg", SVG)
            + write("site/index.html", EVIL_HTML)
            + write("data.txt", "plain text\n")
            + finish("Wrote the files."),
        },
        {"stage": "summary", "content": "Files written."},
    )
    page = new_page()
    pwned: list[str] = []
    page.on("request", lambda r: pwned.append(r.url) if "pwned" in r.url else None)
    page.goto(ui_server.url)
    send_goal(page, "Write code files")
    summary = page.get_by_test_id("summary")
    expect(summary.get_by_test_id("file")).to_have_count(5)
    dialog = page.get_by_test_id("preview")

    def open_preview(name: str) -> None:
        summary.get_by_test_id("file-preview").filter(has_text=name).click()
        expect(dialog).to_be_visible()
        expect(dialog.locator("h2")).to_have_text(name)

    def close_preview() -> None:
        page.keyboard.press("Escape")
        expect(dialog).to_be_hidden()

    open_preview("app.py")
    expect(dialog.locator("pre.hljs .hljs-keyword").first).to_have_text("def")
    expect(dialog.locator("pre.hljs")).to_contain_text("return 42")
    close_preview()

    open_preview("docs/notes.md")
    expect(dialog.locator(".md h1")).to_have_text("Notes")
    expect(dialog.locator(".md li strong")).to_have_text("two")
    close_preview()

    open_preview("logo.svg")
    img = dialog.locator("img")
    expect(img).to_be_visible()
    wait_for(lambda: img.evaluate("el => el.complete && el.naturalWidth") == 40, what="the image")
    close_preview()

    open_preview("data.txt")
    expect(dialog.get_by_test_id("text-preview")).to_have_text("plain text\n")
    close_preview()

    open_preview("site/index.html")
    frame_el = dialog.get_by_test_id("html-preview")
    expect(frame_el).to_have_attribute("sandbox", "")
    assert "allow-scripts" not in (frame_el.get_attribute("sandbox") or "")
    frame = page.frame_locator("[data-testid=html-preview]")
    expect(frame.locator("h1")).to_have_text("Static page")
    page.screenshot(path=str(ARTIFACTS / "preview-html.png"))
    close_preview()

    # a file link on an action card opens the same preview
    page.get_by_test_id("action-write_code").first.get_by_test_id("file-link").click()
    expect(dialog.locator("h2")).to_have_text("app.py")
    expect(dialog.locator("pre.hljs")).to_contain_text("return 42")
    page.screenshot(path=str(ARTIFACTS / "preview-code.png"))
    close_preview()
    assert pwned == []


def test_stop_button_stops_the_run(
    ui_server: Server, fake_model: FakeModelServer, new_page: NewPage
) -> None:
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Wait for the model")},
        {"stage": "thinking", "content": finish("never"), "hold": "stop-test"},
    )
    page = new_page()
    page.goto(ui_server.url)
    send_goal(page, "Write code slowly")
    expect(page.get_by_test_id("task")).to_have_attribute("data-status", "running")
    expect(page.get_by_test_id("working")).to_be_visible()
    expect(page.get_by_test_id("conversation-status")).to_have_text("running")
    page.screenshot(path=str(ARTIFACTS / "run-running.png"))
    stop = page.get_by_test_id("stop")
    expect(stop).to_be_enabled()
    stop.click()
    expect(page.get_by_test_id("run-stopped")).to_be_visible()
    expect(page.get_by_test_id("stop")).to_have_count(0)
    expect(page.get_by_test_id("working")).to_have_count(0)
    # the task the stop interrupted reads as stopped, not failed, and fills no bar
    expect(page.get_by_test_id("task")).to_have_attribute("data-status", "stopped")
    expect(page.get_by_test_id("progress-text")).to_have_text("1 task · stopped")
    expect(page.get_by_role("progressbar")).to_have_attribute("aria-valuenow", "0")
    expect(page.locator('.progress-bar[data-part="failed"]')).to_have_count(0)
    expect(page.get_by_test_id("conversation-status")).to_have_text("stopped")
    expect(page.get_by_test_id("summary")).to_be_visible()
    cid = conversation_id(page)
    with ui_server.client() as c:
        assert c.get(f"/api/conversations/{cid}").json()["status"] == "stopped"
    page.screenshot(path=str(ARTIFACTS / "run-stopped.png"))


def script_held_second_task(fake: FakeModelServer, hold: str) -> None:
    fake.script(
        {"stage": "planning", "content": plan_reply("One", "Two")},
        {"stage": "thinking", "content": write("a.txt", "a\n") + finish("a done")},
        {"stage": "thinking", "content": write("b.txt", "b\n") + finish("b done"), "hold": hold},
        {"stage": "summary", "content": "Both written."},
    )


def test_reload_mid_run_replays_and_keeps_following(
    ui_server: Server, fake_model: FakeModelServer, new_page: NewPage
) -> None:
    script_held_second_task(fake_model, "reload")
    page = new_page()
    page.goto(ui_server.url)
    send_goal(page, "Write code in two steps")
    tasks = page.get_by_test_id("task")
    expect(tasks.nth(1)).to_have_attribute("data-status", "running")
    cid = conversation_id(page)

    page.reload()
    assert page.url.endswith(f"#/c/{cid}")
    expect(page.get_by_test_id("goal")).to_have_text("Write code in two steps")
    expect(tasks).to_have_count(2)
    expect(tasks.nth(0)).to_have_attribute("data-status", "completed")
    expect(tasks.nth(1)).to_have_attribute("data-status", "running")
    expect(page.get_by_test_id("action-write_code")).to_have_count(1)
    expect(page.get_by_test_id("working")).to_be_visible()
    expect(page.get_by_test_id("stop")).to_be_visible()
    page.screenshot(path=str(ARTIFACTS / "reload-mid-run.png"))

    fake_model.release("reload")
    expect(page.get_by_test_id("summary")).to_be_visible()
    expect(tasks.nth(1)).to_have_attribute("data-status", "completed")
    cards = page.get_by_test_id("action-write_code")
    expect(cards).to_have_count(2)  # nothing lost, nothing doubled
    expect(cards.nth(1).get_by_test_id("file-link")).to_have_text("b.txt")
    expect(page.get_by_test_id("working")).to_have_count(0)
    expect(page.get_by_test_id("stop")).to_have_count(0)
    # the view equals a fresh replay of the stored messages
    live = page.locator("article.turn").inner_text()
    page.reload()
    expect(page.get_by_test_id("summary")).to_be_visible()
    turn = page.locator("article.turn")
    wait_for(lambda: turn.inner_text() == live, what="the replayed turn to equal the live one")


def test_dropped_connection_reconnects_by_itself(
    tmp_path: Path, fake_model: FakeModelServer, new_page: NewPage
) -> None:
    """The server dies mid-run and comes back: the open page reconnects without a reload
    and follows the run, which the restarted server continues from its last step."""
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Hang")},
        {"stage": "thinking", "content": finish("never"), "hold": "dropped"},
        # the model call the dead server was waiting for is made again after the restart
        {"stage": "thinking", "content": finish("Done after the restart.")},
    )
    env = server_env(tmp_path, fake_model.base_url, FRONTEND_DIST=str(DIST))
    server = Server(tmp_path, env).start()
    server2: Server | None = None
    try:
        page = new_page()
        page.goto(server.url)
        send_goal(page, "Write code that hangs")
        expect(page.get_by_test_id("task")).to_have_attribute("data-status", "running")
        # the thinking call is under way (held by the model) when the server dies
        wait_for(lambda: "dropped" in fake_model.model.holds, what="the held call")
        server.kill9()
        server2 = Server(tmp_path, env, port=server.port).start()
        expect(page.get_by_test_id("summary")).to_be_visible(timeout=30_000)
        expect(page.get_by_test_id("summary")).to_contain_text("Done after the restart.")
        expect(page.get_by_test_id("task")).to_have_attribute("data-status", "completed")
        expect(page.get_by_test_id("run-error")).to_have_count(0)
        expect(page.get_by_test_id("working")).to_have_count(0)
        expect(page.get_by_test_id("stop")).to_have_count(0)
        expect(page.get_by_test_id("conversation-status")).to_have_text("completed")
        page.screenshot(path=str(ARTIFACTS / "run-resumed-after-restart.png"))
    finally:
        fake_model.release("dropped")
        server.stop()
        if server2 is not None:
            server2.stop()


def test_model_html_in_summary_executes_nothing(
    ui_server: Server, fake_model: FakeModelServer, new_page: NewPage
) -> None:
    evil = (
        "Done <script>window.__pwned = 'script'; new Image().src='/api/health?pwned=script'"
        "</script>\n\n"
        "<img src=x onerror=\"window.__pwned='img'; new Image().src='/api/health?pwned=img'\">\n\n"
        "[link](javascript:window.__pwned='link')\n\n"
        '<iframe src="/api/health?pwned=iframe"></iframe>'
    )
    fake_model.script(
        {
            "stage": "planning",
            "content": "<b onmouseover=alert(1)>plan</b>\n"
            + plan_reply("Write", "Check", prose="<script>window.__pwned='reply'</script>"),
        },
        {
            "stage": "thinking",
            "content": write("x.txt", "x\n") + finish("<img src=x onerror=alert(1)>"),
        },
        {"stage": "thinking", "content": finish("<script>window.__pwned='note'</script>")},
        {"stage": "summary", "content": evil},
    )
    page = new_page()
    dialogs: list[str] = []
    requests: list[str] = []

    def on_dialog(d: Dialog) -> None:
        dialogs.append(d.message)
        d.dismiss()

    page.on("dialog", on_dialog)
    page.on("request", lambda r: requests.append(r.url) if "pwned" in r.url else None)
    page.goto(ui_server.url)
    send_goal(page, "Write code")
    summary = page.get_by_test_id("summary")
    expect(summary).to_be_visible()
    expect(summary).to_contain_text("<script>window.__pwned = 'script'")
    expect(summary).to_contain_text("<img src=x onerror=")
    # the summary streams in live: check the whole of it, once the run is over
    expect(page.get_by_test_id("conversation-status")).to_have_text("completed")
    expect(summary).to_contain_text("<iframe")
    for link in summary.locator("a").all():
        assert not (link.get_attribute("href") or "").lower().startswith("javascript:")
    summary.locator(".md").hover()
    page.get_by_test_id("finish").first.hover()
    page.wait_for_load_state("networkidle")
    assert page.evaluate("() => window.__pwned") is None
    assert page.locator(".md script, .md img, .md iframe").count() == 0
    assert page.locator("[onerror], [onmouseover], [onclick]").count() == 0
    assert dialogs == []
    assert requests == []
    page.screenshot(path=str(ARTIFACTS / "xss-summary.png"), full_page=True)


def test_sidebar_lists_opens_and_deletes_conversations(
    ui_server: Server, fake_model: FakeModelServer, new_page: NewPage
) -> None:
    fake_model.model.auto = True
    page = new_page()
    page.goto(ui_server.url)
    send_goal(page, "first question", mode="chat")
    expect(page.get_by_test_id("auto-reply")).to_have_text("Hello from the fake model.")
    expect(page.get_by_test_id("conversation-status")).to_have_text("completed")
    first = conversation_id(page)
    page.get_by_test_id("new-conversation").click()
    assert "#/c/" not in page.url
    expect(page.get_by_test_id("goal")).to_have_count(0)
    send_goal(page, "second question", mode="chat")
    expect(page.get_by_test_id("conversation-status")).to_have_text("completed")
    second = conversation_id(page)
    assert second != first
    # the same conversation takes a follow-up: a second turn
    send_goal(page, "a follow-up", mode="chat")
    expect(page.get_by_test_id("goal")).to_have_count(2)
    expect(page.get_by_test_id("conversation-status")).to_have_text("completed")
    assert conversation_id(page) == second

    other = new_page()
    other.goto(ui_server.url)
    items = other.get_by_test_id("conversation-list").locator("li")
    expect(items).to_have_count(2)
    expect(items.nth(0)).to_contain_text("second question")  # newest first
    expect(items.nth(1)).to_contain_text("first question")
    items.nth(1).locator(".conv-open").click()
    expect(other.get_by_test_id("goal")).to_have_text("first question")
    expect(other.get_by_test_id("auto-reply")).to_have_text("Hello from the fake model.")
    assert other.url.endswith(f"#/c/{first}")

    # delete asks first; cancelling keeps it
    items.nth(1).get_by_role("button", name="Delete conversation first question").click()
    expect(other.get_by_role("dialog")).to_be_visible()
    other.get_by_role("button", name="Cancel").click()
    expect(items).to_have_count(2)
    items.nth(1).get_by_role("button", name="Delete conversation first question").click()
    other.get_by_test_id("confirm-delete").click()
    expect(items).to_have_count(1)
    expect(other.get_by_test_id("goal")).to_have_count(0)
    with ui_server.client() as c:
        assert c.get(f"/api/conversations/{first}").status_code == 404
        assert c.get(f"/api/conversations/{second}").status_code == 200


def offering(runtimes: list[str]) -> Callable[[Route], None]:
    """A route handler: the server's own GET /api/settings, with ``runtimes`` offered."""

    def handle(route: Route) -> None:
        response = route.fetch()
        route.fulfill(response=response, json={**response.json(), "runtimes": runtimes})

    return handle


def test_runtime_choice_only_when_several_are_offered(
    ui_server: Server, fake_model: FakeModelServer, new_page: NewPage
) -> None:
    fake_model.model.auto = True
    page = new_page()
    page.route("**/api/settings", offering(["local"]))
    page.goto(ui_server.url)
    expect(page.get_by_test_id("mode")).to_be_visible()
    expect(page.get_by_test_id("runtime")).to_have_count(0)

    page2 = new_page()
    page2.route("**/api/settings", offering(builtin_runtimes().names()))
    bodies: list[Any] = []
    page2.on(
        "request",
        lambda r: (
            bodies.append(json.loads(r.post_data or "{}"))
            if r.url.endswith("/api/agent/run")
            else None
        ),
    )
    page2.goto(ui_server.url)
    runtime = page2.get_by_test_id("runtime")
    expect(runtime).to_be_visible()
    assert runtime.locator("option").all_inner_texts() == builtin_runtimes().names()
    runtime.select_option("local")
    box = page2.get_by_test_id("goal-input")
    box.fill("line one")
    box.press("Shift+Enter")
    box.type("line two")
    box.press("Enter")
    expect(page2.get_by_test_id("goal")).to_have_text("line one\nline two")
    # the approval mode goes with every run: the server's default (APPROVAL_MODE) until picked
    assert bodies == [
        {"goal": "line one\nline two", "mode": "auto", "runtime": "local", "approval": "never"}
    ]


def test_token_is_asked_once_and_sent(
    tmp_path: Path, fake_model: FakeModelServer, new_page: NewPage
) -> None:
    fake_model.model.auto = True
    env = server_env(tmp_path, fake_model.base_url, FRONTEND_DIST=str(DIST), AUTH_TOKEN="s3cret")
    server = Server(tmp_path, env).start()
    try:
        page = new_page()
        page.goto(server.url)
        dialog = page.get_by_test_id("token-dialog")
        expect(dialog).to_be_visible()
        page.get_by_test_id("token-input").fill("wrong")
        page.get_by_test_id("token-submit").click()
        expect(dialog).to_contain_text("not accepted")
        page.get_by_test_id("token-input").fill("s3cret")
        page.get_by_test_id("token-submit").click()
        expect(dialog).to_be_hidden()
        send_goal(page, "hello there", mode="chat")
        expect(page.get_by_test_id("conversation-status")).to_have_text("completed")
        assert page.evaluate("() => sessionStorage.getItem('planact.token')") == "s3cret"
        # the zip is offered once the workspace has a file: upload one, with the token
        note = tmp_path / "note.txt"
        note.write_text("n\n")
        page.get_by_test_id("file-input").set_input_files(str(note))
        expect(page.get_by_test_id("attachment")).to_have_attribute("data-state", "done")
        href = page.get_by_test_id("download-all").get_attribute("href") or ""
        assert href.endswith("access_token=s3cret")
        assert httpx.get(server.url + href, timeout=10).status_code == 200
        # a reload keeps the session's token: no second prompt
        page.reload()
        expect(page.get_by_test_id("goal")).to_have_text("hello there")
        expect(dialog).to_be_hidden()
    finally:
        server.stop()
