"""Cross-site attacks from real pages in Chromium: a page of another
origin posts a goal (a no-cors fetch and a form), and a page whose DNS name was rebound to
127.0.0.1 reads the API. planact must refuse both, with no AUTH_TOKEN set."""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import Frame, Page

from tests.agent.scripts import finish, plan_reply, run
from tests.e2e.server import Server
from tests.fakellm import FakeModelServer
from tests.support.browser import CHROMIUM, LAUNCH_ARGS

NewPage = Callable[..., Page]

ATTACK_PAGE = """<!doctype html>
<meta charset="utf-8"><title>a page on another origin</title>
<form id="form" method="POST" enctype="text/plain" target="sink" action="TARGET/api/agent/run">
  <input type="hidden" name='{"mode": "agent", "goal": "GOAL", "pad": "' value='"}'>
</form>
<iframe name="sink"></iframe>
<script>
  window.sendFetch = async () => {
    try {
      await fetch('TARGET/api/agent/run', {
        method: 'POST', mode: 'no-cors', headers: {'Content-Type': 'text/plain'},
        body: JSON.stringify({goal: 'GOAL', mode: 'agent'}),
      })
      return 'sent'
    } catch (e) {
      return 'failed: ' + e
    }
  }
</script>
"""


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextlib.contextmanager
def attacker_site(root: Path, target: str, goal: str) -> Iterator[str]:
    """A tiny web server on another port serving the attacker's page."""
    root.mkdir()
    page = ATTACK_PAGE.replace("TARGET", target).replace("GOAL", goal)
    (root / "attack.html").write_text(page, encoding="utf-8")
    handler = functools.partial(_QuietHandler, directory=str(root))
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(10)


def frame_text(frame: Frame) -> str:
    try:
        return str(frame.content())
    except PlaywrightError:  # still navigating
        return ""


def test_a_page_of_another_origin_cannot_start_a_run(
    ui_server: Server, fake_model: FakeModelServer, new_page: NewPage, tmp_path: Path
) -> None:
    marker = tmp_path / "pwned"
    # were a run started, the model would have it run this command
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Touch the marker")},
        {"stage": "thinking", "content": run(f"touch {marker}") + finish("Done.")},
    )
    run_url = f"{ui_server.url}/api/agent/run"
    with attacker_site(tmp_path / "attacker", ui_server.url, f"touch {marker}") as site:
        page = new_page()
        page.goto(f"{site}/attack.html")
        with page.expect_response(lambda r: r.url == run_url) as fetched:
            assert page.evaluate("sendFetch()") == "sent"
        assert fetched.value.status == 403
        page.evaluate(
            "() => { window.sinkLoaded = new Promise((done) => document.querySelector('iframe')"
            ".addEventListener('load', done, {once: true})) }"
        )
        with page.expect_response(lambda r: r.url == run_url) as posted:
            page.evaluate("document.getElementById('form').submit()")
        assert posted.value.status == 403
        sink = page.frame(name="sink")
        assert sink is not None
        assert page.evaluate("window.sinkLoaded.then(() => true)")
        # Chromium shows not even the refusal in the attacker's frame (frame-ancestors 'none')
        assert "forbidden" not in frame_text(sink)

    assert httpx.get(f"{ui_server.url}/api/conversations").json() == []
    assert fake_model.model.calls == []
    assert not marker.exists()


def test_dns_rebinding_reads_and_changes_nothing(
    browser: Any, ui_server: Server, fake_model: FakeModelServer, tmp_path: Path
) -> None:
    fake_model.script({"stage": "auto_reply", "content": "The secret answer."})
    r = httpx.post(
        f"{ui_server.url}/api/agent/run",
        json={"goal": "a secret goal", "mode": "chat"},
        headers={"Accept": "application/json"},
    )
    assert r.status_code == 202
    # evil.example now resolves to this machine, as after a DNS rebinding
    rebound = browser.browser_type.launch(
        executable_path=str(CHROMIUM),
        args=[*LAUNCH_ARGS, "--host-resolver-rules=MAP evil.example 127.0.0.1"],
    )
    try:
        page = rebound.new_context().new_page()
        origin = f"http://evil.example:{ui_server.port}"
        # any document of that origin will do (the attacker's page, before the rebinding);
        # planact refuses even this one, but the page can still run script
        response = page.goto(f"{origin}/")
        assert response is not None and response.status == 400
        # same-origin for the browser, so no CORS stands in the way: the Host check does
        status, text = page.evaluate(
            "async () => { const r = await fetch('/api/conversations');"
            " return [r.status, await r.text()] }"
        )
        assert status == 400 and "ALLOWED_HOSTS" in text
        assert "secret" not in text
        status = page.evaluate(
            "async () => (await fetch('/api/agent/run', {method: 'POST',"
            " headers: {'Content-Type': 'application/json'},"
            " body: JSON.stringify({goal: 'x', mode: 'chat'})})).status"
        )
        assert status == 400
    finally:
        rebound.close()
    listed = httpx.get(f"{ui_server.url}/api/conversations").json()
    assert [c["title"] for c in listed] == ["a secret goal"]
