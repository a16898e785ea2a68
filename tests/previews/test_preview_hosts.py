"""Per-preview hosts (PREVIEW_HOST_PATTERN, docs/api.md "Previews"): each preview on a host
of its own, routed by the Host header; the shared /p/<token>/ form does not answer then."""

from __future__ import annotations

import secrets
from pathlib import Path

import httpx
import pytest
from pydantic import ValidationError

from backend.config import Settings
from backend.previews.links import PreviewLinks, new_token
from tests.fakellm import FakeModelServer
from tests.support.previews import (
    app_script,
    done,
    preview_message,
    preview_tag,
    start_preview_server,
    write_app,
)


def scope_with_host(host: str) -> list[tuple[bytes, bytes]]:
    return [(b"host", host.encode())]


def test_links_on_the_preview_origin_and_on_hosts_of_their_own() -> None:
    on_origin = PreviewLinks("http://127.0.0.1:8001")
    assert on_origin.link("abc", "/x") == "http://127.0.0.1:8001/p/abc/x"
    assert on_origin.frame_source() == "http://127.0.0.1:8001"
    assert on_origin.token_of_host(scope_with_host("abc.preview.example.com")) is None
    hosts = PreviewLinks("https://preview.example.com", "*.preview.example.com")
    assert hosts.link("abc", "/x") == "https://abc.preview.example.com/x"
    assert hosts.frame_source() == "https://*.preview.example.com"
    assert hosts.token_of_host(scope_with_host("abc.preview.example.com")) == "abc"
    assert hosts.token_of_host(scope_with_host("ABC.Preview.Example.com:443")) == "abc"
    assert hosts.token_of_host(scope_with_host("preview.example.com")) is None
    assert hosts.token_of_host(scope_with_host("a.b.preview.example.com")) is None
    assert hosts.token_of_host(scope_with_host("abc.preview.example.org")) is None
    assert hosts.token_of_host([]) is None
    with_port = PreviewLinks("http://127.0.0.1:9", "*.preview.localhost:8002")
    assert with_port.link("abc", "/") == "http://abc.preview.localhost:8002/"
    assert with_port.token_of_host(scope_with_host("abc.preview.localhost:8002")) == "abc"
    assert with_port.token_of_host(scope_with_host("abc.preview.localhost:8003")) is None


def test_tokens_are_unguessable_host_names() -> None:
    tokens = {new_token() for _ in range(200)}
    assert len(tokens) == 200
    for token in tokens:
        assert len(token) == 32 and token.isalnum() and token == token.lower()


@pytest.mark.parametrize(
    "pattern",
    [
        "preview.example.com",
        "*preview.example.com",
        "*.",
        "*.exa mple.com",
        "*.a.com:99999",
        "*.*.a.com",
    ],
)
def test_a_bad_host_pattern_is_refused_with_what_it_should_be(pattern: str) -> None:
    with pytest.raises(ValidationError, match="PREVIEW_HOST_PATTERN"):
        Settings(preview_host_pattern=pattern)


def test_an_empty_host_pattern_means_none() -> None:
    assert Settings(preview_host_pattern=" ").preview_host_pattern is None
    assert Settings(preview_host_pattern="*.Preview.Example.com").preview_host_pattern == (
        "*.preview.example.com"
    )


@pytest.mark.bwrap
def test_a_preview_on_a_host_of_its_own(tmp_path: Path, fake_model: FakeModelServer) -> None:
    pattern = "*.preview.localhost"
    servers = start_preview_server(
        "local-bwrap", tmp_path, fake_model, PREVIEW_HOST_PATTERN=pattern
    )
    ps = next(servers)
    try:
        marker = f"pv{secrets.token_hex(6)}"
        app_script(
            fake_model, write_app() + preview_tag(8080, f"python3 app.py 8080 {marker}"), done()
        )
        messages, end, _headers = ps.server.run({"goal": "Build me an app and show it"})
        assert end["status"] == "completed", messages[-3:]
        url = preview_message(messages)["meta"]["json"][0]["url"]
        host = httpx.URL(url).host
        token = host.removesuffix(".preview.localhost")
        assert url == f"http://{token}.preview.localhost/"  # no port in the pattern: a proxy's
        direct = f"http://127.0.0.1:{ps.preview_port}"
        with httpx.Client(timeout=30) as c:
            page = c.get(direct + "/", headers={"host": f"{host}:{ps.preview_port}"})
            assert page.status_code == 200 and "sample app" in page.text
            api = c.get(direct + "/api/hello", headers={"host": host}).json()
            assert api["hello"] == "preview" and api["path"] == "/api/hello"
            forged = new_token()
            assert (
                c.get(direct + "/", headers={"host": f"{forged}.preview.localhost"}).status_code
                == 404
            )
            # no page of it is served on an origin shared with other previews
            assert c.get(f"{direct}/p/{token}/").status_code == 404
            assert c.get(f"{direct}/p/{token}/", headers={"host": host}).status_code == 200
        with ps.server.client() as api_client:
            headers = api_client.get("/api/settings").headers
            policy = headers["content-security-policy"]
            assert "frame-src 'self' http://*.preview.localhost" in policy
    finally:
        next(servers, None)
