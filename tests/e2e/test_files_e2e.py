"""Black-box: every file the real server lists downloads, whatever its name; upload limits
hold whatever the transfer encoding and however many uploads come at once."""

from __future__ import annotations

import json
import select
import socket
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.agent.scripts import finish, plan_reply, run
from tests.e2e.cluster import follow, start_json
from tests.e2e.server import Server, running_server, server_env
from tests.fakellm import FakeModelServer
from tests.pg import postgres_url, reset

pytestmark = pytest.mark.e2e

# names a command can make that a URL must carry: a newline, a carriage return, a control
# character, a literal percent escape, a question mark, a hash
MAKE = (
    "printf 1 > \"$(printf 'line\\nbreak.txt')\"; printf 2 > \"$(printf 'cr\\rname')\"; "
    "printf 3 > \"$(printf 'ctl\\001.txt')\"; printf 4 > 'pct %41 ?q #h.txt'; "
    "mkdir \"$(printf 'dir\\nx')\"; printf 5 > \"$(printf 'dir\\nx')/in.txt\""
)


def test_every_listed_file_downloads(tmp_path: Path, fake_model: FakeModelServer) -> None:
    fake_model.script(
        {"stage": "route", "content": '{"task_type": "code_generation", "needs_tools": true}'},
        {"stage": "planning", "content": plan_reply("Make files")},
        {"stage": "thinking", "content": run(MAKE) + finish("made them")},
        {"stage": "summary", "content": "Made the files."},
    )
    with running_server(tmp_path, fake_model.base_url) as server:
        _messages, end, headers = server.run({"goal": "Please make the files"})
        assert end["status"] == "completed"
        cid = headers["x-conversation-id"]
        with server.client() as client:
            listed = client.get(f"/api/conversations/{cid}/files").json()
            names = {f["filepath"]: f for f in listed}
            assert set(names) == {
                "line\nbreak.txt",
                "cr\rname",
                "ctl\x01.txt",
                "pct %41 ?q #h.txt",
                "dir\nx/in.txt",
            }
            for name, entry in names.items():
                got = client.get(entry["url"])
                assert got.status_code == 200, (name, got.text)
                assert got.content.decode() in "12345"


def test_a_run_that_starts_while_an_upload_is_sent_gets_the_upload_refused(
    tmp_path: Path, fake_model: FakeModelServer
) -> None:
    """The "no active run" check was made when the upload began: a run started while the
    body was on its way found the files written into its workspace mid-run."""
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Hold")},
        {"stage": "thinking", "content": finish("held"), "hold": "upload"},
    )
    b = "planactboundary"
    head = (
        f'--{b}\r\nContent-Disposition: form-data; name="file"; filename="mid.txt"\r\n'
        "Content-Type: text/plain\r\n\r\n"
    ).encode()
    with running_server(tmp_path, fake_model.base_url) as server:
        with server.client() as c:
            cid = c.post("/api/conversations", json={}).json()["conversation_id"]
        started: list[httpx.Response] = []

        def body() -> Iterator[bytes]:
            yield head + b"x" * 4096
            started.append(start_json(server, {"goal": "write code", "conversation_id": cid}))
            yield b"y" * 4096 + f"\r\n--{b}--\r\n".encode()

        with server.client() as c:
            resp = c.post(
                f"/api/conversations/{cid}/files",
                content=body(),
                headers={"content-type": f"multipart/form-data; boundary={b}"},
            )
        assert started[0].status_code == 202, started[0].text
        assert resp.status_code == 409, resp.text
        ws = tmp_path / "workspace" / "user_1" / f"Conversation_{cid}"
        assert not (ws / "mid.txt").exists()
        fake_model.release("upload")
        _, end = follow(server, started[0].json()["run_id"])
        assert end is not None and end["status"] == "completed"
        with server.client() as c:  # nothing was lost: it can be sent again now
            again = c.post(
                f"/api/conversations/{cid}/files",
                files=[("file", ("mid.txt", b"x", "text/plain"))],
            )
            assert again.status_code == 201, again.text


# -- upload limits over real HTTP ---------------------------------------------------------

BOUNDARY = "planactboundary"
CHUNK = 64 * 1024


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def chunked_upload(server: Server, path: str, field: str, total: int) -> tuple[int, bytes]:
    """POST a multipart body of ``total`` bytes of file content with Transfer-Encoding:
    chunked (no Content-Length), over a raw socket; stop sending as soon as an answer
    comes. (bytes of body sent, the raw answer)."""
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
        f"Content-Type: multipart/form-data; boundary={BOUNDARY}\r\n"
        "Transfer-Encoding: chunked\r\n\r\n"
    ).encode()
    part = (
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="{field}"; filename="big.bin"'
        "\r\nContent-Type: application/octet-stream\r\n\r\n"
    ).encode()
    tail = f"\r\n--{BOUNDARY}--\r\n".encode()
    sent = 0
    with socket.create_connection(("127.0.0.1", server.port), timeout=60) as sock:
        sock.sendall(head + _chunk(part))
        pending = b""
        body_left = total
        answered = False
        while not answered:
            if not pending:
                if body_left > 0:
                    piece = min(CHUNK, body_left)
                    body_left -= piece
                    pending = _chunk(b"x" * piece)
                    sent += piece
                elif tail:
                    pending, tail = _chunk(tail) + b"0\r\n\r\n", b""
            readable, writable, _ = select.select([sock], [sock] if pending else [], [], 60)
            if readable:
                answered = True
            elif writable:
                try:
                    pending = pending[sock.send(pending) :]
                except (BrokenPipeError, ConnectionResetError):
                    answered = True
            elif not pending:
                raise AssertionError("no answer within 60 s of the whole body")
        answer = b""
        while b"\r\n\r\n" not in answer or len(answer.split(b"\r\n\r\n", 1)[1]) < _length(answer):
            got = sock.recv(65536)
            if not got:
                break
            answer += got
    return sent, answer


def _length(answer: bytes) -> int:
    for line in answer.split(b"\r\n\r\n", 1)[0].split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    return 0


def _json_body(answer: bytes) -> Any:
    return json.loads(answer.split(b"\r\n\r\n", 1)[1])


def _files_under(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file()] if folder.exists() else []


@pytest.mark.parametrize("api", ["planact", "lemonai"])
def test_a_chunked_upload_is_cut_off_at_the_limit_and_keeps_nothing(
    tmp_path: Path, fake_model: FakeModelServer, api: str
) -> None:
    """No Content-Length: the body is counted as it arrives, and the 413 comes while the
    client is still sending (LemonAI's route read 64 MB to /tmp first, then refused)."""
    total = 64 * 1024 * 1024
    spool = tmp_path / "tmp"
    spool.mkdir()
    with running_server(tmp_path, fake_model.base_url, UPLOAD_MAX_MB="1", TMPDIR=str(spool)) as s:
        with s.client() as c:
            cid = c.post("/api/conversations", json={}).json()["conversation_id"]
        path, field = {
            "planact": (f"/api/conversations/{cid}/files", "file"),
            "lemonai": ("/lemonai/api/file/upload", "files"),
        }[api]
        sent, answer = chunked_upload(s, path, field, total)
        assert answer.startswith(b"HTTP/1.1 413"), answer[:300]
        # cut off near the limit: socket buffers aside, far from the whole body
        assert sent < total // 2, sent
        body = _json_body(answer)
        if api == "lemonai":
            assert body["code"] == 413 and body["data"] is None and "UPLOAD_MAX_MB" in body["msg"]
        else:
            assert body["error"]["code"] == "too_large"
            assert "UPLOAD_MAX_MB" in body["error"]["message"]
        assert _files_under(tmp_path / "workspace") == []
        assert list(spool.iterdir()) == []
        with s.client() as c:  # the server goes on answering
            assert c.get("/api/health").status_code == 200


def _concurrent_posts(urls_and_kwargs: list[tuple[str, dict[str, Any]]]) -> list[httpx.Response]:
    barrier = threading.Barrier(len(urls_and_kwargs))

    def post(item: tuple[str, dict[str, Any]]) -> httpx.Response:
        url, kwargs = item
        with httpx.Client(timeout=120) as client:
            barrier.wait(60)
            return client.post(url, **kwargs)

    with ThreadPoolExecutor(len(urls_and_kwargs)) as pool:
        return list(pool.map(post, urls_and_kwargs))


def _usage(folder: Path) -> int:
    return sum(p.stat().st_size for p in _files_under(folder))


UPLOADS = 20
PIECE = 900 * 1024  # 0.9 MB: three fit in 3 MB, a fourth does not
BUDGET = 3 * 1024 * 1024


@pytest.mark.parametrize("processes", [1, 2])
def test_concurrent_uploads_never_pass_the_workspace_budget(
    tmp_path: Path, fake_model: FakeModelServer, processes: int
) -> None:
    """20 uploads of 0.9 MB at once against WORKSPACE_MAX_MB=3: exactly three are kept
    (the others 413), also when two server processes share the workspace volume."""
    extra = {"WORKSPACE_MAX_MB": "3"}
    if processes > 1:
        url = postgres_url()
        reset(url)
        extra["DATABASE_URL"] = url
    env = server_env(tmp_path, fake_model.base_url, **extra)
    servers = [Server(tmp_path, env).start() for _ in range(processes)]
    try:
        with servers[0].client() as c:
            cid = c.post("/api/conversations", json={}).json()["conversation_id"]
        posts = [
            (
                f"{servers[i % processes].url}/api/conversations/{cid}/files",
                {"files": [("file", (f"part{i}.bin", b"p" * PIECE, "x/y"))]},
            )
            for i in range(UPLOADS)
        ]
        answers = _concurrent_posts(posts)
    finally:
        for server in servers:
            server.stop()
    statuses = sorted(r.status_code for r in answers)
    assert statuses == [201] * 3 + [413] * (UPLOADS - 3), statuses
    for refused in (r for r in answers if r.status_code == 413):
        assert "WORKSPACE_MAX_MB" in refused.json()["error"]["message"]
    workspace = tmp_path / "workspace" / "user_1" / f"Conversation_{cid}"
    assert _usage(workspace) == 3 * PIECE <= BUDGET


def test_concurrent_lemonai_uploads_never_pass_the_staging_budget(
    tmp_path: Path, fake_model: FakeModelServer
) -> None:
    """LemonAI stages uploads before a conversation exists: held to WORKSPACE_MAX_MB too."""
    with running_server(tmp_path, fake_model.base_url, WORKSPACE_MAX_MB="3") as server:
        posts = [
            (
                f"{server.url}/lemonai/api/file/upload",
                {"files": [("files", (f"part{i}.bin", b"p" * PIECE, "x/y"))]},
            )
            for i in range(UPLOADS)
        ]
        answers = _concurrent_posts(posts)
    statuses = sorted(r.status_code for r in answers)
    assert statuses == [200] * 3 + [413] * (UPLOADS - 3), statuses
    for refused in (r for r in answers if r.status_code == 413):
        assert refused.json()["code"] == 413 and "WORKSPACE_MAX_MB" in refused.json()["msg"]
    staging = tmp_path / "workspace" / "user_1" / ".lemonai-uploads"
    assert _usage(staging) == 3 * PIECE <= BUDGET
    assert len(list(staging.iterdir())) == 3  # no folder left by a refused upload


def test_lemonai_attachments_and_uploads_at_once_never_pass_the_workspace_budget(
    tmp_path: Path, fake_model: FakeModelServer
) -> None:
    """LemonAI moves staged files into the workspace when a run names them: the same budget
    lock as planact's uploads, so the two together cannot pass it, and a file named by two
    runs at once is attached once (the other answer is a JSON 404 or 409, never a 500)."""
    fake_model.script(*[{"stage": "auto_reply", "content": "Got it."}] * 4)
    with running_server(tmp_path, fake_model.base_url, WORKSPACE_MAX_MB="3") as server:
        with server.client() as c:
            staged = c.post(
                "/lemonai/api/file/upload",
                files=[("files", (f"s{i}.bin", b"s" * PIECE, "x/y")) for i in range(3)],
            )
            assert staged.status_code == 200, staged.text
            ids = [f["id"] for f in staged.json()["data"]]
            cid = c.post("/lemonai/api/conversation", json={"content": "q"}).json()["data"][
                "conversation_id"
            ]
        run = {"question": "hi", "conversation_id": cid, "fileIds": ids, "mode": "chat"}
        posts: list[tuple[str, dict[str, Any]]] = [
            (f"{server.url}/lemonai/api/agent/run", {"json": run}) for _ in range(3)
        ] + [
            (
                f"{server.url}/api/conversations/{cid}/files",
                {"files": [("file", (f"u{i}.bin", b"u" * PIECE, "x/y"))]},
            )
            for i in range(8)
        ]
        answers = _concurrent_posts(posts)
        for resp in answers:
            assert resp.status_code < 500, resp.text
            assert resp.status_code in (200, 201, 404, 409, 413), resp.text
        runs = [r.status_code for r in answers[:3]]
        assert runs.count(200) <= 1, runs
        workspace = tmp_path / "workspace" / "user_1" / f"Conversation_{cid}"
        assert _usage(workspace) <= BUDGET
        for rid in {r.headers.get("x-run-id") for r in answers[:3]} - {None}:
            _, end = follow(server, str(rid))  # a started run ends
            assert end is not None
