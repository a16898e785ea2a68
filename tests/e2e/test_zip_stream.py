"""Black-box: the workspace zip of the real server is streamed as it is made, refused before
any byte over the budget, bounded in number, and stopped when its client leaves."""

from __future__ import annotations

import io
import os
import socket
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from backend.workspace import workspace_path
from tests.e2e.server import Server, server_env, wait_for
from tests.fakellm import FakeModelServer

pytestmark = pytest.mark.e2e

GB = 1 << 30
BUDGET_MB = 200_000  # WORKSPACE_MAX_MB of this server: room for a 100 GB sparse file


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, fake_model_server: FakeModelServer
) -> Iterator[Server]:
    work = tmp_path_factory.mktemp("zip")
    (work / "tmp").mkdir()
    env = server_env(
        work,
        fake_model_server.base_url,
        WORKSPACE_MAX_MB=str(BUDGET_MB),
        ZIP_MAX_CONCURRENT="1",
        TMPDIR=str(work / "tmp"),  # where a temporary zip would go
    )
    server = Server(work, env).start()
    yield server
    server.stop()


def new_workspace(server: Server, files: dict[str, int | bytes]) -> tuple[str, Path]:
    """A conversation whose workspace holds ``files``: bytes, or a size for a sparse file
    (no disk used, every byte a zero)."""
    with server.client() as c:
        cid = c.post("/api/conversations", json={"title": "zip"}).json()["conversation_id"]
    workspace = workspace_path(server.workdir / "workspace", "1", cid)
    for rel, content in files.items():
        (workspace / rel).parent.mkdir(parents=True, exist_ok=True)
        with open(workspace / rel, "wb") as f:
            if isinstance(content, bytes):
                f.write(content)
            else:
                f.truncate(content)
    return cid, workspace


def held_open(server: Server, path: Path) -> bool:
    """Whether the server process holds a descriptor on ``path``."""
    assert server.proc is not None
    fds = Path(f"/proc/{server.proc.pid}/fd")
    for fd in os.listdir(fds):
        try:
            if os.readlink(fds / fd) == str(path):
                return True
        except OSError:
            continue  # closed meanwhile
    return False


def test_a_sparse_workspace_over_the_budget_is_413_before_any_byte(server: Server) -> None:
    cid, workspace = new_workspace(server, {"s.bin": 300 * GB, "a.txt": b"a"})
    assert os.stat(workspace / "s.bin").st_blocks == 0
    with server.client() as c:
        got = c.get(f"/api/conversations/{cid}/files.zip")
    assert got.status_code == 413
    assert got.headers["content-type"] == "application/json"
    assert got.json()["error"]["code"] == "too_large"
    assert not held_open(server, workspace / "s.bin")
    assert list((server.workdir / "tmp").iterdir()) == []


def test_a_client_that_leaves_stops_the_zip_and_frees_its_slot(server: Server) -> None:
    """The zip ran in a worker thread nobody could stop, into a temporary file, and each
    request took another thread; now it is made chunk by chunk as the client reads, stops
    with the client, and ZIP_MAX_CONCURRENT (1 here) bounds how many run at once."""
    big, big_ws = new_workspace(server, {"big.bin": 100 * GB})
    small, _ = new_workspace(server, {"dir/x.txt": b"x" * 1000, "y.txt": b"y"})
    sparse = big_ws / "big.bin"
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=60)
    try:
        sock.sendall(
            f"GET /api/conversations/{big}/files.zip HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()
        )
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = sock.recv(65536)
            assert chunk, head
            head += chunk
        assert head.startswith(b"HTTP/1.1 200"), head[:300]
        assert b"content-type: application/zip" in head.lower()
        wait_for(lambda: held_open(server, sparse), what="the server reading big.bin")
        assert list((server.workdir / "tmp").iterdir()) == []  # streamed, no temporary file
        with server.client() as c:
            busy = c.get(f"/api/conversations/{small}/files.zip")
        assert busy.status_code == 429
        assert busy.json()["error"]["code"] == "busy"
        assert "ZIP_MAX_CONCURRENT" in busy.json()["error"]["message"]
        assert int(busy.headers["retry-after"]) > 0
    finally:
        sock.close()
    wait_for(lambda: not held_open(server, sparse), what="the zip to stop with its client")
    with server.client() as c:
        got = c.get(f"/api/conversations/{small}/files.zip")
    assert got.status_code == 200
    archive = zipfile.ZipFile(io.BytesIO(got.content))
    assert archive.read("dir/x.txt") == b"x" * 1000 and archive.read("y.txt") == b"y"
