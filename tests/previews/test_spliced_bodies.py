"""The preview listener's own path for a service's plain HTTP/1.1 requests (docs/api.md
"Previews"): bodies of known length moved socket to socket (splice), heads read and the token
checked on every request, kept-alive connections, and the ways a client or an app can cut a
body short — each an error for the other side, never a hang, nothing left open.

The real listener, forwarder and app of tests/support/preview_origin.py."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from pathlib import Path

import h11
import httpx
import pytest

from backend.previews import conn, splice
from tests.support.preview_origin import (
    BIG,
    TOKEN,
    Origin,
    exchange,
    open_fds,
    pattern,
    request,
)


def test_10_mb_both_ways_arrive_intact(origin: Origin) -> None:
    upload = os.urandom(BIG)
    with httpx.Client(timeout=30) as client:
        down = client.get(f"{origin.base}/pattern/{BIG}")
        assert down.status_code == 200
        assert int(down.headers["content-length"]) == BIG
        assert hashlib.sha256(down.content).digest() == hashlib.sha256(pattern(BIG)).digest()
        up = client.post(f"{origin.base}/upload", content=upload)
        assert up.json() == {"size": BIG, "sha256": hashlib.sha256(upload).hexdigest()}


def test_a_kept_alive_connection_goes_on_after_spliced_bodies(origin: Origin) -> None:
    body = os.urandom(3_000_000)
    with origin.connect() as sock:
        client = h11.Connection(h11.CLIENT)
        head, got = exchange(sock, client, *request("POST", f"/p/{TOKEN}/upload", body))
        assert head.status_code == 200
        assert json.loads(got)["sha256"] == hashlib.sha256(body).hexdigest()
        head, got = exchange(sock, client, *request("GET", f"/p/{TOKEN}/pattern/2000000"))
        assert head.status_code == 200 and got == pattern(2_000_000)
        head, got = exchange(sock, client, *request("GET", f"/p/{TOKEN}/hello"))
        assert (head.status_code, got) == (200, b"hello")


def test_pipelined_requests_each_get_their_answer(origin: Origin) -> None:
    body = b"z" * 100_000
    client = h11.Connection(h11.CLIENT)
    with origin.connect() as sock:
        wire = b"".join(client.send(e) or b"" for e in request("POST", f"/p/{TOKEN}/upload", body))
        second = h11.Connection(h11.CLIENT)
        wire += b"".join(second.send(e) or b"" for e in request("GET", f"/p/{TOKEN}/hello"))
        sock.sendall(wire)  # both requests in one write
        head, got = exchange(sock, client)
        assert json.loads(got)["size"] == len(body)
        reader = h11.Connection(h11.CLIENT)
        reader.send(request("GET", "/")[0])
        reader.send(h11.EndOfMessage())
        if leftover := client.trailing_data[0]:  # the second answer, read with the first's
            reader.receive_data(leftover)
        head, got = exchange(sock, reader)
        assert (head.status_code, got) == (200, b"hello")


def test_a_copied_request_body_goes_whole_and_stops_at_its_end(
    origin: Origin, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A request's body is copied to the app through a buffer (backend/previews/splice.py):
    in many pieces (a buffer of an odd size here), exactly its bytes reach the app, and the
    next request, sent in the same write, is left for the next answer."""
    monkeypatch.setattr(splice, "COPY_SIZE", 4093)
    body = os.urandom(3 * (1 << 20) + 12345)
    client = h11.Connection(h11.CLIENT)
    with origin.connect() as sock:
        wire = b"".join(client.send(e) or b"" for e in request("POST", f"/p/{TOKEN}/upload", body))
        second = h11.Connection(h11.CLIENT)
        wire += b"".join(second.send(e) or b"" for e in request("GET", f"/p/{TOKEN}/hello"))
        sock.sendall(wire)
        head, got = exchange(sock, client)
        assert head.status_code == 200
        assert json.loads(got) == {"size": len(body), "sha256": hashlib.sha256(body).hexdigest()}
        reader = h11.Connection(h11.CLIENT)
        reader.send(request("GET", "/")[0])
        reader.send(h11.EndOfMessage())
        if leftover := client.trailing_data[0]:
            reader.receive_data(leftover)
        head, got = exchange(sock, reader)
        assert (head.status_code, got) == (200, b"hello")


@pytest.mark.parametrize("way", ["upload", "download"])
def test_a_client_that_stalls_mid_body_holds_up_no_other_connection(
    origin: Origin, way: str
) -> None:
    """A client that stops sending its body (upload) or reading its answer (download) and
    keeps its connection open: other clients' bodies go on meanwhile, both ways, and when it
    closes nothing of it is left."""
    fds = open_fds()
    stalled = origin.connect()
    try:
        if way == "upload":
            head = f"POST /p/{TOKEN}/upload HTTP/1.1\r\nHost: x\r\nContent-Length: {BIG}\r\n\r\n"
            stalled.sendall(head.encode() + b"u" * 2_000_000)
        else:
            target = f"/p/{TOKEN}/pattern/{5 * BIG}"
            stalled.sendall(f"GET {target} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            assert stalled.recv(65536).startswith(b"HTTP/1.1 200")  # then reads no more
        upload = os.urandom(BIG)
        with httpx.Client(timeout=30) as client:
            up = client.post(f"{origin.base}/upload", content=upload)
            assert up.json() == {"size": BIG, "sha256": hashlib.sha256(upload).hexdigest()}
            down = client.get(f"{origin.base}/pattern/{BIG}")
            assert down.content == pattern(BIG)
        assert origin.connections() >= 1  # the stalled one, still served
    finally:
        stalled.close()
    origin.wait_idle(fds)


def test_the_token_is_checked_on_every_request_of_a_connection(origin: Origin) -> None:
    with origin.connect() as sock:
        client = h11.Connection(h11.CLIENT)
        head, got = exchange(sock, client, *request("GET", f"/p/{TOKEN}/hello"))
        assert (head.status_code, got) == (200, b"hello")
        forged = TOKEN[:-1] + ("a" if TOKEN[-1] != "a" else "b")
        head, got = exchange(sock, client, *request("GET", f"/p/{forged}/hello"))
        assert head.status_code == 404 and b"hello" not in got
        head, _ = exchange(sock, client, *request("GET", "/hello"))  # no token at all
        assert head.status_code == 404


def test_an_expected_continue_is_answered_before_the_body(origin: Origin) -> None:
    body = b"c" * 200_000
    with origin.connect() as sock:
        head = (
            f"POST /p/{TOKEN}/upload HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n"
            "Expect: 100-continue\r\n\r\n"
        )
        sock.sendall(head.encode())
        assert sock.recv(100) == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(body)
        client = h11.Connection(h11.CLIENT)
        client.send(h11.Request(method="POST", target="/", headers=[("host", "x")]))
        _, got = exchange(sock, client)
        assert json.loads(got)["size"] == len(body)


def test_chunked_and_until_close_answers_are_passed_on(origin: Origin) -> None:
    with httpx.Client(timeout=20) as client:
        chunked = client.get(f"{origin.base}/chunked")
        assert (chunked.status_code, chunked.content) == (200, b"first,second,third")
        ended = client.get(f"{origin.base}/until-close")
        assert (ended.status_code, ended.content) == (200, b"all of it")
        assert client.get(f"{origin.base}/hello").content == b"hello"


def test_an_app_that_cuts_its_answer_short_is_an_error_for_the_client(origin: Origin) -> None:
    fds = open_fds()
    with httpx.Client(timeout=20) as client:
        with pytest.raises(httpx.RemoteProtocolError):
            client.get(f"{origin.base}/short")
        silent = client.get(f"{origin.base}/silent")
        assert silent.status_code == 502
        assert silent.text.startswith("The preview's app did not answer")
        assert client.get(f"{origin.base}/hello").content == b"hello"
    origin.wait_idle(fds)


@pytest.mark.parametrize("way", ["upload", "download"])
def test_a_client_gone_mid_body_leaves_no_task_and_no_descriptor(origin: Origin, way: str) -> None:
    fds = open_fds()
    with origin.connect() as sock:
        if way == "upload":
            head = f"POST /p/{TOKEN}/upload HTTP/1.1\r\nHost: x\r\nContent-Length: {BIG}\r\n\r\n"
            sock.sendall(head.encode() + b"u" * 1_000_000)
        else:
            sock.sendall(f"GET /p/{TOKEN}/pattern/{5 * BIG} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            assert sock.recv(65536).startswith(b"HTTP/1.1 200")
        assert origin.connections() == 1
    origin.wait_idle(fds)
    with httpx.Client(timeout=20) as client:  # and the app still answers
        assert client.get(f"{origin.base}/hello").content == b"hello"


def test_a_store_that_fails_ends_that_connection_not_the_listener(
    origin: Origin, tmp_path: Path
) -> None:
    """The token cannot be checked (its table gone): the client's connection is closed
    unanswered, nothing is forwarded, and the listener serves the next one."""
    with sqlite3.connect(tmp_path / "planact.db") as db:
        db.execute("ALTER TABLE previews RENAME TO previews_away")
    try:
        with httpx.Client(timeout=20) as client, pytest.raises(httpx.RemoteProtocolError):
            client.get(f"http://127.0.0.1:{origin.port}/p/{'x' * 32}/hello")
    finally:
        with sqlite3.connect(tmp_path / "planact.db") as db:
            db.execute("ALTER TABLE previews_away RENAME TO previews")
    with httpx.Client(timeout=20) as client:
        assert client.get(f"{origin.base}/hello").content == b"hello"


def test_slow_or_idle_clients_are_closed_in_time(
    origin: Origin, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A connection that sends no head, one whose head trickles in past the head limit, and
    one idle after an answer past the idle limit: each closed by the listener."""
    monkeypatch.setattr(conn, "HEAD_TIMEOUT", 0.5)
    monkeypatch.setattr(conn, "IDLE", 0.2)
    with origin.connect() as silent:
        assert silent.recv(100) == b""  # closed unanswered
    with origin.connect() as trickle:
        trickle.sendall(f"GET /p/{TOKEN}/hello HTTP/1.1\r\n".encode())
        with pytest.raises(OSError):  # each byte in time, the whole head not
            for _ in range(100):
                trickle.sendall(b"X-Slow: 1\r\n")
                time.sleep(0.05)  # the client's pace (the limit is the listener's)
    with origin.connect() as idle:
        client = h11.Connection(h11.CLIENT)
        head, got = exchange(idle, client, *request("GET", f"/p/{TOKEN}/hello"))
        assert (head.status_code, got) == (200, b"hello")
        assert idle.recv(100) == b""  # then closed, idle


def test_a_chunked_upload_and_an_http_1_0_request_reach_the_app_whole(origin: Origin) -> None:
    """A chunked upload (re-framed for the app piece by piece) and an HTTP/1.0 request
    (answered as HTTP/1.0, until close): the app gets them whole, the client too."""
    parts = [os.urandom(300_000) for _ in range(5)]
    with httpx.Client(timeout=20) as client:
        up = client.post(f"{origin.base}/upload", content=iter(parts))  # chunked
        assert up.json()["sha256"] == hashlib.sha256(b"".join(parts)).hexdigest()
    with origin.connect() as sock:
        sock.sendall(f"GET /p/{TOKEN}/pattern/1000 HTTP/1.0\r\nHost: x\r\n\r\n".encode())
        answer = b""
        while data := sock.recv(65536):
            answer += data
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.split(b" ", 2)[1] == b"200" and body == pattern(1000)
