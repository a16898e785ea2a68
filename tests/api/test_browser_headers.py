"""The headers that make the browser enforce planact's protections (backend/api/headers.py):
the UI's Content-Security-Policy and X-Frame-Options on every page and asset, a sandbox
policy on every workspace file, and no script type for a file the agent wrote. What Chromium
does with them is in tests/ui/test_browser_protections.py."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from backend.api.headers import UI_POLICY, download_media_type
from backend.app import create_app
from backend.config import Settings
from backend.llm.testing import ScriptedLLM
from tests.support.settings import make_settings


def directives(policy: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for part in policy.split(";"):
        name, *values = part.split()
        found[name] = values
    return found


@pytest.fixture
def ui_settings(tmp_path: Path) -> Settings:
    dist = tmp_path / "dist"
    (dist / "assets").mkdir(parents=True)
    (dist / "index.html").write_text("<!doctype html><div id=app></div>")
    (dist / "assets" / "index-1.js").write_text("console.log(1)")
    (dist / "assets" / "index-1.css").write_text("body{}")
    return make_settings(tmp_path, frontend_dist=dist)


@pytest.fixture
def client(ui_settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(ui_settings, llm=ScriptedLLM([]))) as c:
        yield c


def test_the_ui_policy_allows_only_this_origin() -> None:
    d = directives(UI_POLICY)
    assert d["default-src"] == ["'self'"]
    assert d["script-src"] == ["'self'"]  # no 'unsafe-inline', no 'unsafe-eval'
    assert d["img-src"] == ["'self'", "data:", "blob:"]
    assert d["frame-ancestors"] == ["'none'"]
    assert d["object-src"] == ["'none'"]
    assert d["base-uri"] == ["'none'"]
    assert d["form-action"] == ["'self'"]
    assert "'unsafe-eval'" not in UI_POLICY


@pytest.mark.parametrize(
    "path", ["/", "/index.html", "/assets/index-1.js", "/assets/index-1.css", "/c/some/route"]
)
def test_every_ui_response_carries_the_policy(client: TestClient, path: str) -> None:
    r = client.get(path)
    assert r.status_code == 200
    # the UI policy, and the UI's App panel may frame the preview origin (and only it)
    assert r.headers["content-security-policy"] == (
        f"{UI_POLICY}; frame-src 'self' http://*.localhost:8001"
    )
    assert r.headers["x-frame-options"] == "DENY"
    assert r.headers["x-content-type-options"] == "nosniff"


@pytest.mark.parametrize("path", ["/api/health", "/api/conversations", "/api/nope"])
def test_api_answers_and_errors_carry_it_too(client: TestClient, path: str) -> None:
    r = client.get(path)
    assert r.headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in r.headers["content-security-policy"]


def test_refusals_of_the_guard_carry_it(client: TestClient) -> None:
    r = client.post("/api/conversations", json={}, headers={"Origin": "http://evil.example"})
    assert r.status_code == 403
    assert r.headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in r.headers["content-security-policy"]


def test_without_a_built_ui_the_notice_carries_it(settings: Settings) -> None:
    with TestClient(create_app(settings, llm=ScriptedLLM([]))) as c:
        r = c.get("/")
        assert "not built" in r.text
        assert r.headers["content-security-policy"].startswith(UI_POLICY + "; frame-src ")


FILES = {
    "page.html": ("<script>fetch('/api/conversations', {method: 'POST'})</script>", "text/html"),
    "logo.svg": (
        "<svg xmlns='http://www.w3.org/2000/svg'><script>x()</script></svg>",
        "image/svg+xml",
    ),
    "evil.js": ("fetch('/api/conversations', {method: 'POST'})", "text/plain"),
    "mod.mjs": ("export default 1", "text/plain"),
    "data.json": ('{"a": 1}', "application/json"),
    "noext": ("plain", "application/octet-stream"),
}


def test_workspace_files_are_sandboxed_and_never_a_script(client: TestClient) -> None:
    state = client.app.state  # type: ignore[attr-defined]
    assert client.portal is not None
    cid = client.portal.call(state.store.create_conversation, "1", "files")
    workspace = state.manager.workspace("1", cid)
    workspace.mkdir(parents=True)
    for name, (content, _type) in FILES.items():
        (workspace / name).write_text(content)
    for name, (content, media_type) in FILES.items():
        r = client.get(f"/api/files/{cid}/{name}")
        assert r.status_code == 200 and r.text == content
        assert r.headers["content-type"].split(";")[0] == media_type, name
        policy = directives(r.headers["content-security-policy"])
        assert "sandbox" in policy and policy["sandbox"] == []  # no allow-scripts, no origin
        assert policy["default-src"] == ["'none'"]
        assert r.headers["x-content-type-options"] == "nosniff"
        assert r.headers["content-disposition"].startswith("attachment;")
    # LemonAI's file read serves the same way
    lemon = client.post(
        "/lemonai/api/file/read", json={"path": "page.html", "conversation_id": cid}
    )
    assert lemon.status_code == 200 and lemon.text == FILES["page.html"][0]
    assert "sandbox" in directives(lemon.headers["content-security-policy"])
    z = client.get(f"/api/conversations/{cid}/files.zip")
    assert "sandbox" in directives(z.headers["content-security-policy"])
    assert sorted(zipfile.ZipFile(io.BytesIO(z.content)).namelist()) == sorted(FILES)


@pytest.mark.parametrize(
    ("guessed", "served"),
    [
        ("text/javascript", "text/plain"),
        ("application/javascript", "text/plain"),
        ("application/x-javascript", "text/plain"),
        ("text/ecmascript", "text/plain"),
        ("TEXT/JavaScript; charset=utf-8", "text/plain"),
        ("text/css", "text/css"),
        ("image/svg+xml", "image/svg+xml"),
        ("application/json", "application/json"),
        (None, "application/octet-stream"),
    ],
)
def test_download_media_type(guessed: str | None, served: str) -> None:
    assert download_media_type(guessed) == served
