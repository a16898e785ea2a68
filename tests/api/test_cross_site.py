"""The cross-site guard's rules (backend/api/cross_site.py), table-driven over a tiny app; the
real server is exercised in tests/e2e/test_security_http.py and tests/ui/test_cross_site.py."""

from __future__ import annotations

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.testclient import TestClient

from backend.api.cross_site import GuardMiddleware, parse_authority, parse_origin


async def ok(_request: Request) -> Response:
    return JSONResponse({"ok": True})


def client(
    allowed_hosts: str = "", allowed_origins: str = "", bound: str = "127.0.0.1"
) -> TestClient:
    app = Starlette(routes=[Route("/{p:path}", ok, methods=["GET", "POST", "DELETE"])])
    app.add_middleware(
        GuardMiddleware,
        allowed_hosts=allowed_hosts,
        allowed_origins=allowed_origins,
        bound_host=bound,
    )
    return TestClient(app)


@pytest.mark.parametrize(
    ("allowed", "bound", "host", "status"),
    [
        ("", "127.0.0.1", "127.0.0.1:8000", 200),
        ("", "127.0.0.1", "localhost", 200),
        ("", "127.0.0.1", "[::1]:8000", 200),
        ("", "127.0.0.1", "evil.example", 400),
        ("", "127.0.0.1", "127.0.0.1.evil.example", 400),
        ("", "10.0.0.5", "10.0.0.5:8000", 200),  # the bound host
        ("", "0.0.0.0", "0.0.0.0:8000", 400),  # a wildcard bind is no name
        ("planact.example.com", "0.0.0.0", "planact.example.com", 200),
        ("planact.example.com", "0.0.0.0", "PLANACT.example.com.:443", 200),
        ("planact.example.com", "0.0.0.0", "localhost:8000", 200),  # loopback always
        ("planact.example.com:8443", "0.0.0.0", "planact.example.com:8443", 200),
        ("planact.example.com:8443", "0.0.0.0", "planact.example.com:9000", 400),
        ("planact.example.com:8443", "0.0.0.0", "planact.example.com", 400),
        ("fd00::1, a.test", "0.0.0.0", "[fd00::1]:8000", 200),
        ("fd00::1, a.test", "0.0.0.0", "a.test:1", 200),
        ("*", "0.0.0.0", "anything.example", 200),
        ("", "127.0.0.1", "a b", 400),
        ("", "127.0.0.1", "x:99999999", 400),
        ("", "127.0.0.1", "[::1", 400),
    ],
)
def test_host_rules(allowed: str, bound: str, host: str, status: int) -> None:
    with client(allowed, bound=bound) as c:
        r = c.get("/api/conversations", headers={"Host": host})
        assert r.status_code == status, r.text
        if status == 400:
            assert r.json()["error"]["code"] == "invalid_request"
        # health answers probes whatever the Host
        assert c.get("/api/health", headers={"Host": host}).status_code == 200


@pytest.mark.parametrize(
    ("allowed", "host", "headers", "status"),
    [
        ("", "127.0.0.1:8000", {}, 200),  # not a browser
        ("", "127.0.0.1:8000", {"Origin": "http://127.0.0.1:8000"}, 200),
        ("", "127.0.0.1:8000", {"Origin": "http://localhost:8000"}, 403),
        ("", "127.0.0.1:8000", {"Origin": "http://127.0.0.1:8001"}, 403),
        ("", "127.0.0.1:8000", {"Origin": "null"}, 403),
        ("", "127.0.0.1:8000", {"Origin": "file://"}, 403),
        ("", "127.0.0.1:8000", {"Referer": "http://127.0.0.1:8000/#/c/1"}, 200),
        ("", "127.0.0.1:8000", {"Referer": "http://evil.example/"}, 403),
        ("", "127.0.0.1:8000", {"Referer": "garbage"}, 403),
        # Origin wins over Referer
        (
            "",
            "127.0.0.1:8000",
            {"Origin": "http://127.0.0.1:8000", "Referer": "http://evil.example/"},
            200,
        ),
        # behind a TLS proxy that keeps the Host header
        ("", "planact.example.com", {"Origin": "https://planact.example.com"}, 200),
        ("", "planact.example.com", {"Origin": "http://planact.example.com"}, 200),
        ("", "planact.example.com:8443", {"Origin": "https://planact.example.com:8443"}, 200),
        ("", "planact.example.com", {"Origin": "https://planact.example.com:8443"}, 403),
        ("", "planact.example.com", {"Origin": "https://evil.example"}, 403),
        # ALLOWED_ORIGINS
        ("http://localhost:5173", "127.0.0.1:8000", {"Origin": "http://localhost:5173"}, 200),
        ("https://ui.test", "127.0.0.1:8000", {"Origin": "https://ui.test:443"}, 200),
        ("https://ui.test", "127.0.0.1:8000", {"Origin": "http://ui.test"}, 403),
        ("*", "127.0.0.1:8000", {"Origin": "https://anyone.example"}, 200),
        ("*", "127.0.0.1:8000", {"Origin": "null"}, 200),
    ],
)
def test_origin_rules(allowed: str, host: str, headers: dict[str, str], status: int) -> None:
    with client("planact.example.com", allowed) as c:
        for method in ("POST", "DELETE"):
            r = c.request(method, "/api/agent/run", headers={"Host": host, **headers})
            assert r.status_code == status, (method, r.text)
            if status == 403:
                assert r.json()["error"]["code"] == "forbidden"
        # reading is never refused for the origin (CORS keeps the answer from the page)
        assert c.get("/api/x", headers={"Host": host, **headers}).status_code == 200


def test_parsers() -> None:
    assert parse_authority("[::1]:80") is not None
    assert parse_authority("") is None
    assert parse_authority("a@b") is None
    assert parse_origin("https://x.test").port == 443  # type: ignore[union-attr]
    assert parse_origin("ftp://x.test") is None
    assert parse_origin("http://x.test:notaport") is None
