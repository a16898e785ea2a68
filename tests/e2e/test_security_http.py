"""The HTTP edge against the real `planact serve`: cross-site requests, foreign
Host headers, content types, malformed input, and connections that are held open.

Raw httpx and raw sockets; the server's own sockets are counted from /proc."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import selectors
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.server import Server, server_env, wait_for
from tests.fakellm import FakeModelServer
from tests.pg import postgres_url, reset

pytestmark = pytest.mark.e2e

HEADER_TIMEOUT = 3.0
WRITE_TIMEOUT = 2.0
MAX_CONNECTIONS = 100


@pytest.fixture(scope="module")
def model() -> Iterator[FakeModelServer]:
    server = FakeModelServer(auto=True).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, model: FakeModelServer) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("edge")
    env = server_env(
        tmp,
        model.base_url,
        HTTP_HEADER_TIMEOUT=str(HEADER_TIMEOUT),
        HTTP_BODY_TIMEOUT=str(HEADER_TIMEOUT),
        HTTP_WRITE_TIMEOUT=str(WRITE_TIMEOUT),
        HTTP_MAX_CONNECTIONS=str(MAX_CONNECTIONS),
        # whole replies: a long reply streamed in 64-character chunks costs seconds
        LLM_STREAM="false",
    )
    srv = Server(tmp, env).start()
    yield srv
    srv.stop()


@pytest.fixture
def opened() -> Iterator[list[socket.socket]]:
    """Raw client sockets a test opens, closed whatever happens."""
    socks: list[socket.socket] = []
    yield socks
    for s in socks:
        s.close()


# -- helpers ------------------------------------------------------------------------------


def error_of(resp: httpx.Response, status: int, code: str) -> str:
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"].startswith("application/json"), resp.headers
    body = resp.json()
    assert set(body) == {"error"} and body["error"]["code"] == code, body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    return str(body["error"]["message"])


def conversations(server: Server) -> list[dict[str, Any]]:
    r = httpx.get(f"{server.url}/api/conversations")
    assert r.status_code == 200
    return list(r.json())


def start(server: Server, body: dict[str, Any]) -> dict[str, str]:
    r = httpx.post(f"{server.url}/api/agent/run", json=body, headers={"Accept": "application/json"})
    assert r.status_code == 202, r.text
    return dict(r.json())


def finished(server: Server, cid: str) -> bool:
    r = httpx.get(f"{server.url}/api/conversations/{cid}", timeout=30)
    return r.json()["status"] in ("completed", "failed", "stopped")


def wait_end(server: Server, cid: str) -> None:
    # the first run imports litellm: seconds on a busy machine
    wait_for(lambda: finished(server, cid), timeout=120, what="the run to end")


def server_sockets(server: Server) -> int:
    """TCP connections the server process holds on its port (the listener excluded)."""
    assert server.proc is not None
    pid = server.proc.pid
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            rows = f.read().splitlines()[1:]
        for row in rows:
            fields = row.split()
            local_port = int(fields[1].rsplit(":", 1)[1], 16)
            if fields[9] in inodes and local_port == server.port and fields[3] != "0A":
                count += 1
    return count


def connect(server: Server, slow_reader: bool = False) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if slow_reader:
        # a small window, and small segments: on loopback the server's send buffer grows
        # with the segment size (MBs for loopback's 64 KiB MSS), hiding a stalled client
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, 536)
    sock.connect(("127.0.0.1", server.port))
    return sock


def read_until_closed(sock: socket.socket, timeout: float) -> bytes:
    """Everything the server sends until it closes the connection."""
    sock.settimeout(timeout)
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except ConnectionResetError:
        pass
    return data


def read_head(sock: socket.socket) -> bytes:
    """Read just past a response head (a few hundred bytes), leaving the body unread."""
    sock.settimeout(60)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(1)
        if not chunk:
            break
        data += chunk
    return data


def json_response(raw: bytes) -> tuple[int, dict[str, Any]]:
    head, _, body = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    assert b"content-type: application/json" in head.lower(), head
    return status, json.loads(body)


def wait_all_closed(socks: list[socket.socket], timeout: float) -> list[bytes]:
    """Wait until the server closed every socket; return what each received."""
    received = {s.fileno(): b"" for s in socks}
    open_ = {s.fileno(): s for s in socks}
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        for s in socks:
            s.setblocking(False)
            sel.register(s, selectors.EVENT_READ)
        while open_ and time.monotonic() < deadline:
            for key, _ in sel.select(timeout=0.5):
                s = open_[key.fd]
                try:
                    chunk = s.recv(65536)
                except ConnectionResetError:
                    chunk = b""
                if chunk:
                    received[key.fd] += chunk
                else:
                    sel.unregister(s)
                    del open_[key.fd]
    assert not open_, f"{len(open_)} of {len(socks)} connections still open after {timeout}s"
    return [received[s.fileno()] for s in socks]


# -- cross-site requests (finding 1) --------------------------------------------------------


def test_cross_site_posts_are_refused_and_create_nothing(
    server: Server, model: FakeModelServer
) -> None:
    before = conversations(server)
    calls = len(model.model.calls)
    body = json.dumps({"goal": "touch /tmp/pwned", "mode": "agent"}).encode()
    url = f"{server.url}/api/agent/run"
    for headers in (
        # the browser's "simple" request: no preflight
        {"Origin": "http://evil.example", "Content-Type": "text/plain"},
        {"Origin": "http://evil.example", "Content-Type": "application/json"},
        # another port of the same host is another origin
        {"Origin": "http://127.0.0.1:1", "Content-Type": "application/json"},
        {"Origin": f"https://evil.example:{server.port}", "Content-Type": "application/json"},
        {"Origin": "null", "Content-Type": "application/json"},
        {"Referer": "http://evil.example/page.html", "Content-Type": "application/json"},
        {"Origin": "not a url", "Content-Type": "application/json"},
    ):
        msg = error_of(httpx.post(url, content=body, headers=headers), 403, "forbidden")
        assert "ALLOWED_ORIGINS" in msg
    cid = before[0]["conversation_id"] if before else "0" * 32
    for method, path in (
        ("POST", "/api/agent/runs/" + "0" * 32 + "/stop"),
        ("DELETE", f"/api/conversations/{cid}"),
        ("PUT", "/api/conversations"),
        ("PATCH", f"/api/conversations/{cid}"),
    ):
        r = httpx.request(method, server.url + path, headers={"Origin": "http://evil.example"})
        error_of(r, 403, "forbidden")
    assert conversations(server) == before
    assert len(model.model.calls) == calls


def test_same_origin_and_originless_requests_pass(server: Server) -> None:
    url = f"{server.url}/api/agent/run"
    h = {"Accept": "application/json"}
    for extra in (
        {},  # curl, scripts
        {"Origin": server.url},
        {"Origin": f"http://localhost:{server.port}", "Host": f"localhost:{server.port}"},
        {"Referer": f"{server.url}/some/page"},
    ):
        r = httpx.post(url, json={"goal": "hello", "mode": "chat"}, headers={**h, **extra})
        assert r.status_code == 202, (extra, r.text)
        cid, rid = r.json()["conversation_id"], r.json()["run_id"]
        wait_end(server, cid)
    # a bodiless POST from the UI needs no content type
    r = httpx.post(f"{server.url}/api/agent/runs/{rid}/stop", headers={"Origin": server.url})
    assert r.status_code == 202, r.text


def test_foreign_host_is_refused_dns_rebinding(server: Server) -> None:
    start(server, {"goal": "a secret goal", "mode": "chat"})
    for host in ("evil.example", f"evil.example:{server.port}", "127.0.0.2", "[::2]:80", "@x"):
        r = httpx.get(f"{server.url}/api/conversations", headers={"Host": host})
        assert "a secret goal" not in r.text
        assert "ALLOWED_HOSTS" in error_of(r, 400, "invalid_request")
        r = httpx.get(f"{server.url}/", headers={"Host": host})
        error_of(r, 400, "invalid_request")
    for host in (
        f"127.0.0.1:{server.port}",
        f"localhost:{server.port}",
        "localhost",
        f"[::1]:{server.port}",
        "LOCALHOST.",
    ):
        r = httpx.get(f"{server.url}/api/conversations", headers={"Host": host})
        assert r.status_code == 200, (host, r.text)
    # probes may come with any Host
    r = httpx.get(f"{server.url}/api/health", headers={"Host": "10.1.2.3:8000"})
    assert r.json()["status"] == "ok"


def test_json_routes_need_the_json_content_type(server: Server, model: FakeModelServer) -> None:
    before = conversations(server)
    url = f"{server.url}/api/agent/run"
    body = json.dumps({"goal": "hello", "mode": "chat"}).encode()
    for ctype in (
        "text/plain",
        "text/plain;charset=UTF-8",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/jsonp",
        None,
    ):
        headers = {"Accept": "application/json"}
        if ctype is not None:
            headers["Content-Type"] = ctype
        msg = error_of(
            httpx.post(url, content=body, headers=headers), 415, "unsupported_media_type"
        )
        assert "application/json" in msg
    assert conversations(server) == before
    # charset and case are fine; an empty body reads as {} (and lacks a goal)
    for ctype in ("application/json; charset=utf-8", "Application/JSON"):
        r = httpx.post(
            url, content=body, headers={"Content-Type": ctype, "Accept": "application/json"}
        )
        assert r.status_code == 202, r.text
        wait_end(server, r.json()["conversation_id"])
    assert "goal" in error_of(httpx.post(url, content=b""), 400, "invalid_request")


# -- malformed input (finding 7) ------------------------------------------------------------


def test_malformed_bodies_are_json_4xx(server: Server) -> None:
    before = conversations(server)
    url = f"{server.url}/api/agent/run"
    h = {"Content-Type": "application/json", "Accept": "application/json"}
    for raw in (
        b'{"goal": "\\ud800 lone surrogate"}',
        b'{"goal": "x", "\\udfff": 1}',
        b"[" * 500_000,
        b'{"goal": "x", "n": ' + b"1" * 5_000 + b"}",
        b'{"goal": "x", "n": -' + b"9" * 100 + b"}",
        b'{"goal": "x", "n": NaN}',
        b'{"goal": "x", "n": 1' + b"0" * 200 + b".5}",
        b'{"goal": "nul \\u0000 inside"}',
        b'{"goal": "x", "deep": ' + b"[" * 100 + b"]" * 100 + b"}",
        b'{"goal": "x", "conversation_id": "\\ud800"}',
        b"\xff\xfe{}",
        b'{"goal": "\xed\xa0\x80"}',  # a surrogate encoded as UTF-8 bytes
    ):
        r = httpx.post(url, content=raw, headers=h)
        error_of(r, 400, "invalid_request")
    # a conversation id that cannot exist is a 404 without reaching the store
    for cid in ("x" * 100_000, "a\x00b", "../../etc"):
        r = httpx.post(url, json={"goal": "x", "conversation_id": cid}, headers=h)
        assert r.status_code in (400, 404), r.text
        error_of(r, r.status_code, "invalid_request" if r.status_code == 400 else "not_found")
    assert conversations(server) == before


def test_bad_seq_and_ids_are_json_4xx_and_never_start_a_stream(server: Server) -> None:
    ids = start(server, {"goal": "hello", "mode": "chat"})
    cid, rid = ids["conversation_id"], ids["run_id"]
    wait_end(server, cid)
    bad = ("²", "٣", "1" * 19, "1" * 30, "1" * 5_000, "-1", "1.5", "0x10", "abc")
    for value in bad:
        for path in (f"/api/conversations/{cid}/messages", f"/api/agent/runs/{rid}/events"):
            r = httpx.get(server.url + path, params={"after": value})
            assert "after" in error_of(r, 400, "invalid_request")
        r = httpx.get(
            f"{server.url}/api/agent/runs/{rid}/events",
            headers=[(b"Last-Event-ID", value.encode())],
        )
        assert "Last-Event-ID" in error_of(r, 400, "invalid_request")
    check_big_seqs(server, cid, rid)
    # good values still work, and the stream ends properly
    r = httpx.get(f"{server.url}/api/agent/runs/{rid}/events", params={"after": "1"})
    assert r.status_code == 200 and "event: end" in r.text
    assert httpx.get(f"{server.url}/api/conversations/{cid}/messages?after=0").json()
    # ids that cannot exist, in every route that takes one
    for weird in ("a" * 10_000, "%00", "%ED%A0%80", "%FF", "a%0Ab", "x y"):
        for method, path in (
            ("GET", f"/api/conversations/{weird}"),
            ("GET", f"/api/conversations/{weird}/messages"),
            ("GET", f"/api/conversations/{weird}/files"),
            ("GET", f"/api/conversations/{weird}/files.zip"),
            ("DELETE", f"/api/conversations/{weird}"),
            ("GET", f"/api/agent/runs/{weird}/events"),
            ("POST", f"/api/agent/runs/{weird}/stop"),
            ("GET", f"/api/files/{weird}/f.txt"),
        ):
            r = httpx.request(method, server.url + path)
            msg = error_of(r, 404, "not_found")
            assert len(msg) < 500


def check_big_seqs(server: Server, cid: str, rid: str) -> None:
    """Seqs past any the store holds (and past a 32-bit column) read as "nothing after"."""
    for value in ("2147483648", "9" * 18):
        r = httpx.get(f"{server.url}/api/conversations/{cid}/messages", params={"after": value})
        assert r.status_code == 200 and r.json() == [], r.text
        r = httpx.get(f"{server.url}/api/agent/runs/{rid}/events", params={"after": value})
        assert r.status_code == 200 and r.text.count("event: end") == 1, r.text
        assert "event: message" not in r.text


def test_bad_input_on_postgresql(tmp_path: Path, model: FakeModelServer) -> None:
    """PostgreSQL refuses what SQLite takes (NUL in text, integers past the column)."""
    url = postgres_url()
    reset(url)
    env = server_env(tmp_path, model.base_url, DATABASE_URL=url, LLM_STREAM="false")
    server = Server(tmp_path, env).start()
    try:
        ids = start(server, {"goal": "hello", "mode": "chat"})
        wait_end(server, ids["conversation_id"])
        check_big_seqs(server, ids["conversation_id"], ids["run_id"])
        h = {"Content-Type": "application/json", "Accept": "application/json"}
        for raw in (b'{"goal": "a\\u0000b"}', b'{"goal": "x", "conversation_id": "a\\u0000"}'):
            r = httpx.post(f"{server.url}/api/agent/run", content=raw, headers=h)
            assert "NUL" in error_of(r, 400, "invalid_request")
        for path in ("/api/conversations/a%00b", "/api/agent/runs/a%00b/events"):
            error_of(httpx.get(server.url + path), 404, "not_found")
        assert len(conversations(server)) == 1
    finally:
        server.stop()


def raw_exchange(server: Server, data: bytes) -> bytes:
    with connect(server) as sock:
        # the server may answer and close before reading it all
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall(data)
        return read_until_closed(sock, 10)


def test_oversized_url_and_head_are_json(server: Server) -> None:
    host = f"Host: 127.0.0.1:{server.port}\r\n".encode()
    for size in (20_000, 100_000):
        raw = raw_exchange(
            server, b"GET /api/conversations/" + b"a" * size + b" HTTP/1.1\r\n" + host + b"\r\n"
        )
        status, body = json_response(raw)
        assert status == 414 and body["error"]["code"] == "too_large"
    raw = raw_exchange(
        server, b"GET /api/health HTTP/1.1\r\n" + host + b"X-Big: " + b"a" * 100_000 + b"\r\n\r\n"
    )
    status, body = json_response(raw)
    assert status == 431 and body["error"]["code"] == "too_large"
    raw = raw_exchange(server, b"GET /api/health HTTP/1.1\r\n" + host + b"Bad Header\r\n\r\n")
    status, body = json_response(raw)
    assert status == 400 and body["error"]["code"] == "invalid_request"
    # a long id that the parser accepts reaches the app: a JSON 404
    raw = raw_exchange(
        server,
        b"GET /api/conversations/"
        + b"a" * 15_000
        + b" HTTP/1.1\r\n"
        + host
        + b"Connection: close\r\n\r\n",
    )
    status, body = json_response(raw)
    assert status == 404 and body["error"]["code"] == "not_found"


# -- held connections (finding 6) ------------------------------------------------------------


def test_half_sent_heads_and_bodies_time_out(server: Server, opened: list[socket.socket]) -> None:
    host = f"Host: 127.0.0.1:{server.port}\r\n".encode()
    silent = connect(server)
    partial = connect(server)
    partial.sendall(b"GET /api/health HTTP/1.1\r\n" + host)
    slow_body = connect(server)
    opened.extend([silent, partial, slow_body])
    slow_body.sendall(
        b"POST /api/agent/run HTTP/1.1\r\n"
        + host
        + b'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"goal": '
    )
    got = wait_all_closed([silent, partial, slow_body], HEADER_TIMEOUT + 15)
    assert got[0] == b""  # nothing asked, nothing answered
    status, body = json_response(got[1])
    assert status == 408 and body["error"]["code"] == "timeout"
    status, body = json_response(got[2])
    assert status == 408 and body["error"]["code"] == "timeout"
    assert httpx.get(f"{server.url}/api/health").status_code == 200


def test_connection_cap_closes_the_oldest_half_open_first(
    server: Server, opened: list[socket.socket]
) -> None:
    host = f"Host: 127.0.0.1:{server.port}\r\n".encode()
    socks = opened
    for _ in range(MAX_CONNECTIONS + 20):
        s = connect(server)
        s.sendall(b"GET /api/health HTTP/1.1\r\n" + host)
        socks.append(s)
    wait_for(lambda: server_sockets(server) <= MAX_CONNECTIONS, what="the cap to hold")
    r = httpx.get(f"{server.url}/api/health", timeout=10)
    assert r.status_code == 200
    got = wait_all_closed(socks, HEADER_TIMEOUT + 15)
    # the first ones made room (closed without an answer), the others timed out
    assert got[0] == b""
    assert json_response(got[-1])[0] == 408


def test_sse_clients_that_never_read_are_cut_off(
    server: Server, model: FakeModelServer, opened: list[socket.socket]
) -> None:
    # a long reply (varied: litellm refuses a stream that repeats one chunk)
    text = " ".join(f"w{i}" for i in range(50_000))
    model.script({"stage": "auto_reply", "content": text})
    ids = start(server, {"goal": "say a lot", "mode": "chat"})
    wait_end(server, ids["conversation_id"])
    baseline = server_sockets(server)
    request = (
        f"GET /api/agent/runs/{ids['run_id']}/events HTTP/1.1\r\n"
        f"Host: 127.0.0.1:{server.port}\r\nAccept: text/event-stream\r\n\r\n"
    ).encode()
    clients = opened
    for _ in range(50):
        s = connect(server, slow_reader=True)
        s.sendall(request)
        clients.append(s)
    for s in clients:  # each stream has started; then the client never reads again
        assert read_head(s).startswith(b"HTTP/1.1 200 ")
    # the run has ended; the server cuts off clients that read nothing
    wait_for(
        lambda: server_sockets(server) <= baseline,
        timeout=WRITE_TIMEOUT + 30,
        what="the server to drop the non-reading clients",
    )
    # a reading client still gets the whole stream
    r = httpx.get(f"{server.url}/api/agent/runs/{ids['run_id']}/events", timeout=30)
    assert text in r.text and "event: end" in r.text


# -- many half-open connections: health stays up (finding 6) -----------------------------------

HALF_OPEN = 1000
# a low soft limit for the server's files, as some hosts give by default: the server must
# raise it (to the hard limit) to hold the connections and still answer
SERVER_NOFILE = 512


def _low_nofile() -> None:
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(SERVER_NOFILE, hard), hard))


def test_health_stays_up_under_1000_half_open_connections(
    tmp_path: Path, model: FakeModelServer
) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = HALF_OPEN + 200
    if soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(need, hard), hard))
    count = min(HALF_OPEN, resource.getrlimit(resource.RLIMIT_NOFILE)[0] - 200)
    header_timeout = 15.0  # the half-open ones must outlive the health check
    env = server_env(tmp_path, model.base_url, HTTP_HEADER_TIMEOUT=str(header_timeout))
    server = Server(tmp_path, env, preexec_fn=_low_nofile).start()
    socks: list[socket.socket] = []
    try:
        host = f"Host: 127.0.0.1:{server.port}\r\n".encode()
        for _ in range(count):
            s = connect(server)
            s.sendall(b"GET /api/health HTTP/1.1\r\n" + host)
            socks.append(s)
        wait_for(lambda: server_sockets(server) >= count, what=f"{count} half-open connections")
        # health answers while they are all held...
        r = httpx.get(f"{server.url}/api/health", timeout=5)
        assert r.json()["status"] == "ok"
        assert server_sockets(server) >= count
        # ...and the server closes them itself once the header timeout passes
        got = wait_all_closed(socks, header_timeout + 30)
        assert all(json_response(g)[0] == 408 for g in got)
        assert server_sockets(server) == 0
    finally:
        for s in socks:
            s.close()
        server.stop()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
