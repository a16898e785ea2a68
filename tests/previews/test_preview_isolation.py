"""Each preview an origin of its own (docs/api.md "Previews"): two users' previewed pages in one
Chromium profile share no cookie, storage, service worker or window; a third origin the page
loads from never sees a preview's address (its credential). The real `planact serve` with two
users and the default preview settings (as `make run` serves them: a host per preview under
the listener on PORT+1, ``<token>.localhost:<PORT+1>``), the pages uploaded to each user's
conversation, Chromium resolving ``*.localhost``."""

from __future__ import annotations

import os
import socket
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.server import PLANACT, PROCESS_DEADLINE, Server, server_env
from tests.fakellm import FakeModelServer
from tests.support.ports import free_port, free_port_pair

USERS = {"alice": "token-alice-0123456789", "bob": "token-bob-0123456789"}

# alice's page: leaves what it can for the others, then tries to reach bob's preview
ALICE = """<!doctype html><title>alice</title><script>
document.cookie = "alice_own=1; path=/";
document.cookie = "alice_parent=1; domain=localhost; path=/";
localStorage.setItem("alice", "secret");
window.result = (async () => {
  const reg = await navigator.serviceWorker.register("sw.js", {scope: "/"});
  await navigator.serviceWorker.ready;
  const out = {registered: !!reg};
  const bob = new URLSearchParams(location.search).get("bob");
  const w = window.open(bob, "bobwin");
  await new Promise((r) => setTimeout(r, 1500));  // bob's page loads in the other window
  try { out.read = w.document.title; } catch (e) { out.read = "refused: " + e.name; }
  try { out.stole = w.localStorage.getItem("bob"); } catch (e) { out.stole = "refused"; }
  w.close();
  return out;
})();
</script><img src="THIRD/pixel.png"><a id="out" href="THIRD/clicked">away</a>"""
SW = """self.addEventListener("fetch", (e) => {
  e.respondWith(new Response("intercepted by alice", {headers: {"content-type": "text/html"}}));
});
self.addEventListener("install", () => self.skipWaiting());
self.addEventListener("activate", (e) => e.waitUntil(self.clients.claim()));"""
BOB = """<!doctype html><title>bob</title><script>
localStorage.setItem("bob", "his");
window.seen = {cookies: document.cookie, alice: localStorage.getItem("alice"),
  controlled: !!(navigator.serviceWorker && navigator.serviceWorker.controller)};
</script><p id="bob">bob's own page</p>"""


class Third:
    """Another origin the previewed page loads from: every Referer it is sent."""

    def __init__(self) -> None:
        seen: list[str] = []

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                seen.append(self.headers.get("Referer", ""))
                body = b"<!doctype html><title>elsewhere</title>"
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.seen = seen
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def two_users(tmp_path: Path, fake_model: FakeModelServer) -> Iterator[tuple[Server, int]]:
    """Two users on a server with the default preview settings (no PREVIEW_URL): the
    listener on PORT+1."""
    port = free_port_pair()
    env = server_env(
        tmp_path, fake_model.base_url, AUTH_TOKENS=",".join(f"{u}:{t}" for u, t in USERS.items())
    )
    server = Server(tmp_path, env, port=port).start()
    try:
        yield server, port + 1
    finally:
        server.stop()


def upload_page(server: Server, user: str, files: dict[str, str]) -> dict[str, str]:
    """A conversation of ``user`` holding ``files``; each HTML page's live address."""
    auth = {"Authorization": f"Bearer {USERS[user]}"}
    with server.client(headers=auth) as c:
        cid = c.post("/api/conversations", json={"title": user}).json()["conversation_id"]
        for name, text in files.items():
            up = c.post(
                f"/api/conversations/{cid}/files",
                files={"file": (name, text.encode(), "text/html")},
            )
            assert up.status_code == 201, up.text
        listed = c.get(f"/api/conversations/{cid}/files").json()
    return {f["filepath"]: f["preview_url"] for f in listed if f.get("preview_url")}


def test_two_users_previews_in_one_browser_reach_nothing_of_each_other(
    two_users: tuple[Server, int], chromium: Any
) -> None:
    server, port = two_users
    third = Third()
    alice = upload_page(
        server, "alice", {"index.html": ALICE.replace("THIRD", third.url), "sw.js": SW}
    )
    bob = upload_page(server, "bob", {"index.html": BOB})
    alice_url, bob_url = alice["index.html"], bob["index.html"]
    alice_host, bob_host = httpx.URL(alice_url).host, httpx.URL(bob_url).host
    # an origin each, under the listener, that no other preview shares
    assert alice_host.endswith(".localhost") and bob_host.endswith(".localhost")
    assert alice_host != bob_host and httpx.URL(alice_url).port == port
    context = chromium.new_context()
    try:
        page = context.new_page()
        page.goto(f"{alice_url}?bob={bob_url}")
        out = page.evaluate("() => window.result")
        assert out["registered"]  # alice's page may do what it likes on its own origin
        assert out["read"].startswith("refused") and out["stole"] == "refused"
        page.click("#out")
        page.wait_for_url(f"{third.url}/clicked")
        bob_page = context.new_page()  # bob opens his preview in the same profile afterwards
        bob_page.goto(bob_url)
        assert bob_page.locator("#bob").inner_text() == "bob's own page"  # not intercepted
        seen = bob_page.evaluate("() => window.seen")
        assert seen == {"cookies": "", "alice": None, "controlled": False}
        # the UI's origin got nothing of alice's either
        ui = context.new_page()
        ui.goto(server.url + "/")
        assert ui.evaluate("() => document.cookie") == ""
        assert ui.evaluate("() => localStorage.getItem('alice')") is None
    finally:
        context.close()
        third.server.shutdown()
        third.server.server_close()
    # the third origin was asked (the image, the click) and never told where from
    assert len(third.seen) >= 2
    assert all(alice_host not in r and "localhost" not in r for r in third.seen), third.seen


def test_the_shared_path_form_is_not_served_beside_per_preview_hosts(
    two_users: tuple[Server, int],
) -> None:
    server, port = two_users
    page = upload_page(server, "bob", {"index.html": BOB})["index.html"]
    token = httpx.URL(page).host.split(".")[0]
    shared = f"http://127.0.0.1:{port}/p/{token}/index.html"
    assert httpx.get(shared, timeout=10).status_code == 404
    own = httpx.get(
        f"http://127.0.0.1:{port}/index.html", headers={"host": f"{token}.localhost:{port}"}
    )
    assert own.status_code == 200 and "bob's own page" in own.text


@pytest.mark.parametrize("allowed", [False, True])
def test_one_shared_origin_is_refused_with_several_users_unless_allowed(
    tmp_path: Path, allowed: bool
) -> None:
    env = server_env(
        tmp_path,
        "http://127.0.0.1:9",
        AUTH_TOKENS=",".join(f"{u}:{t}" for u, t in USERS.items()),
        PREVIEW_URL=f"http://127.0.0.1:{free_port()}",
    )
    if not allowed:
        proc = subprocess.run(
            [PLANACT, "serve", "--port", str(free_port())],
            cwd=tmp_path,
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=PROCESS_DEADLINE,
        )
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert "Traceback" not in proc.stderr
        assert "several users share this server" in proc.stderr
        assert (
            "PREVIEW_HOST_PATTERN" in proc.stderr and "ALLOW_SHARED_PREVIEW_ORIGIN=1" in proc.stderr
        )
        return
    server = Server(tmp_path, {**env, "ALLOW_SHARED_PREVIEW_ORIGIN": "1"}).start()
    try:
        with server.client(headers={"Authorization": f"Bearer {USERS['bob']}"}) as c:
            assert c.get("/api/health").status_code == 200
    finally:
        server.stop()
    assert "serves every preview on one origin" in server.log.read_text()  # warned


def server_rss(server: Server) -> int:
    assert server.proc is not None
    with open(f"/proc/{server.proc.pid}/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_two_thousand_idle_preview_connections_leave_the_api_answering(
    two_users: tuple[Server, int],
) -> None:
    """Whoever opens connections to the preview port, with no token at all: the listener
    serves PREVIEW_MAX_CONNECTIONS (1024) and answers the rest 503 at once, the process's
    memory stays bounded and the API (the same process) answers."""
    server, port = two_users
    before = server_rss(server)
    held: list[socket.socket] = []
    refused = 0
    try:
        for _ in range(2000):
            sock = socket.create_connection(("127.0.0.1", port), timeout=30)
            held.append(sock)
        for sock in held[1100:]:  # past the cap: answered and closed at once
            sock.settimeout(30)
            refused += sock.recv(64).startswith(b"HTTP/1.1 503 ")
        with server.client(headers={"Authorization": f"Bearer {USERS['alice']}"}) as c:
            assert c.get("/api/health").status_code == 200
            assert c.get("/api/conversations").status_code == 200
        assert server_rss(server) - before < 100 * 1024 * 1024
    finally:
        for sock in held:
            sock.close()
    assert refused == 900
