"""The preview listener bounded whatever a client sends (docs/api.md "Previews"): heads over
64 KiB refused (431) with or without a token and the memory kept, connections capped, bodies
that stall cut off, malformed requests counted rather than logged, hop-by-hop headers by
``Connection``, a cookie kept to the preview's own host, no ``Referer`` leaving a preview,
upgrades tunnelled through the one parser. The real listener, forwarder and app of
tests/support/preview_origin.py."""

from __future__ import annotations

import json
import logging
import resource
import socket
import time

import h11
import httpx
import pytest

from backend.observe.metrics import REGISTRY
from tests.support.preview_origin import TOKEN, Origin, exchange, open_fds

GB = 1 << 30
MB = 1 << 20


def rss() -> int:
    """This process's resident memory now, in bytes (the listener runs in it)."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * resource.getpagesize()


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def answer_of(sock: socket.socket) -> bytes:
    """Everything the listener sends until it closes (or resets) the connection."""
    got = b""
    try:
        while data := sock.recv(65536):
            got += data
    except OSError:
        pass
    return got


@pytest.mark.parametrize("token", [TOKEN, "unknown0123456789abcdefghijklmno"])
@pytest.mark.parametrize("form", ["header-lines", "request-line"])
def test_a_gigabyte_head_is_refused_431_and_the_memory_stays(
    origin: Origin, token: str, form: str
) -> None:
    before = rss()
    line = b"X-Filler: " + b"f" * 8180 + b"\r\n"
    sent = 0
    with origin.connect() as sock:
        if form == "header-lines":
            sock.sendall(f"GET /p/{token}/hello HTTP/1.1\r\nHost: x\r\n".encode())
            piece = line
        else:
            sock.sendall(f"GET /p/{token}/".encode())
            piece = b"a" * 8192
        try:
            while sent < GB:
                sock.sendall(piece * 16)
                sent += len(piece) * 16
        except OSError:  # refused and closed, long before the gigabyte
            pass
        got = answer_of(sock)
    assert got.startswith(b"HTTP/1.1 431 "), got[:100]
    assert sent < 64 * MB, sent
    assert rss() - before < 100 * MB
    origin.wait_idle(open_fds())


def test_heads_at_the_bound_still_pass(origin: Origin) -> None:
    with origin.connect() as sock:
        client = h11.Connection(h11.CLIENT)
        headers = [("Host", "x"), ("X-Big", "b" * 60000)]
        events = [h11.Request(method="GET", target=f"/p/{TOKEN}/headers", headers=headers)]
        head, body = exchange(sock, client, *events, h11.EndOfMessage())
    assert head.status_code == 200 and len(json.loads(body)["x-big"]) == 60000


def test_connections_past_the_cap_are_refused_and_the_listener_goes_on(origin: Origin) -> None:
    origin.listener.limit = 50
    before = sample("planact_preview_connections_refused_total")
    idle = [origin.connect() for _ in range(50)]
    try:
        deadline = time.monotonic() + 20
        while origin.connections() < 50:
            assert time.monotonic() < deadline, origin.connections()
            time.sleep(0.01)
        extra = [origin.connect() for _ in range(150)]
        for sock in extra:
            with sock:
                assert answer_of(sock).startswith(b"HTTP/1.1 503 ")
        assert sample("planact_preview_connections_refused_total") - before == 150
        assert origin.connections() == 50
    finally:
        for sock in idle:
            sock.close()
    origin.wait_idle(open_fds())
    with httpx.Client(timeout=20) as client:  # a place again once the idle ones are gone
        assert client.get(f"{origin.base}/hello").text == "hello"


def test_an_upload_that_stalls_is_cut_off(origin: Origin) -> None:
    origin.listener.front.body_timeout = 0.3
    with origin.connect() as sock:
        sock.sendall(
            f"POST /p/{TOKEN}/upload HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n".encode()
        )
        sock.sendall(b"x" * 10)
        # answered and closed, the app's half request with it
        assert answer_of(sock).startswith(b"HTTP/1.1 408 ")
    origin.wait_idle(open_fds())


def test_a_head_that_stalls_is_cut_off_and_counted(origin: Origin) -> None:
    origin.listener.front.body_timeout = 0.3
    before = sample("planact_preview_malformed_requests_total", reason="timeout")
    with origin.connect() as sock:
        sock.sendall(f"GET /p/{TOKEN}/hello HTTP/1.1\r\n".encode())
        assert answer_of(sock) == b""
    assert sample("planact_preview_malformed_requests_total", reason="timeout") - before == 1


def test_malformed_requests_are_counted_not_logged(
    origin: Origin, caplog: pytest.LogCaptureFixture
) -> None:
    before = sample("planact_preview_malformed_requests_total", reason="malformed")
    caplog.set_level(logging.INFO)
    for _ in range(20):
        with origin.connect() as sock:
            sock.sendall(b"NOT HTTP AT ALL\r\n\r\n")
            assert answer_of(sock).startswith(b"HTTP/1.1 400 ")
    assert sample("planact_preview_malformed_requests_total", reason="malformed") - before == 20
    assert not [r for r in caplog.records if r.levelno >= logging.INFO], caplog.records


def test_headers_named_in_connection_never_reach_the_app(origin: Origin) -> None:
    with httpx.Client(timeout=20) as client:
        seen = client.get(
            f"{origin.base}/headers",
            headers={
                "Connection": "keep-alive, X-Secret-Hop",
                "X-Secret-Hop": "1",
                "Proxy-Connection": "x",
                "X-Forwarded-For": "203.0.113.9",
                "X-Kept": "yes",
            },
        ).json()
    assert "x-secret-hop" not in seen and "proxy-connection" not in seen
    assert seen["x-kept"] == "yes"
    assert seen["x-forwarded-for"] == "127.0.0.1"  # the proxy's word, not the client's
    assert seen["x-forwarded-prefix"] == f"/p/{TOKEN}"


def test_an_answer_keeps_its_cookies_to_its_host_and_sends_no_referrer_elsewhere(
    origin: Origin,
) -> None:
    with httpx.Client(timeout=20) as client:
        answer = client.get(f"{origin.base}/cookie")
    cookies = answer.headers.get_list("set-cookie")
    assert cookies == ["a=1; Path=/; HttpOnly", "b=2; path=/"]
    assert answer.headers.get_list("referrer-policy") == ["same-origin"]
    assert "x-app-hop" not in answer.headers
    for path in ("/hello", "/nothing-here"):
        with httpx.Client(timeout=20) as client:
            assert client.get(f"{origin.base}{path}").headers["referrer-policy"] == "same-origin"


def test_an_upgrade_is_a_tunnel_both_ways(origin: Origin) -> None:
    with origin.connect() as sock:
        sock.sendall(
            f"GET /p/{TOKEN}/upgrade HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\n"
            "Upgrade: echo\r\n\r\n".encode()
        )
        got = b""
        while b"hello from the app;" not in got:
            data = sock.recv(65536)
            assert data, got
            got += data
        head = got.split(b"\r\n\r\n")[0].lower()
        assert head.startswith(b"http/1.1 101 ") and b"upgrade: echo" in head
        payload = bytes(range(256)) * 4000
        sock.sendall(payload)
        back = b""
        while len(back) < len(payload):
            data = sock.recv(65536)
            assert data
            back += data
        assert back == payload
        sock.shutdown(socket.SHUT_WR)
        assert answer_of(sock) == b""  # the app's end follows the client's
    origin.wait_idle(open_fds())


def test_an_upgrade_the_app_refuses_is_answered_as_it_answered(origin: Origin) -> None:
    with origin.connect() as sock:
        sock.sendall(
            f"GET /p/{TOKEN}/upgrade HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\n"
            "Upgrade: websocket\r\n\r\n".encode()
        )
        assert answer_of(sock).startswith(b"HTTP/1.1 426 ")


def test_an_upgrade_to_an_unknown_preview_is_404(origin: Origin) -> None:
    with origin.connect() as sock:
        sock.sendall(
            b"GET /p/unknown0123456789abcdefghijklmno/upgrade HTTP/1.1\r\nHost: x\r\n"
            b"Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n"
        )
        assert answer_of(sock).startswith(b"HTTP/1.1 404 ")


def test_a_head_request_for_an_unknown_preview_gets_its_404_head(origin: Origin) -> None:
    with httpx.Client(timeout=20) as client:
        for _ in range(2):  # and the connection goes on
            answer = client.head(
                f"{origin.base.rsplit('/p/', 1)[0]}/p/unknown0123456789abcdefghij/"
            )
            assert answer.status_code == 404 and answer.content == b""
