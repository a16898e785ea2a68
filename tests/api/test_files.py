"""Workspace files over HTTP: every listed file downloads; nothing outside is served."""

from __future__ import annotations

import io
import os
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from backend.app import create_app
from backend.config import Settings
from backend.llm.testing import ScriptedLLM

ODD_NAMES = [
    "line\nbreak.txt",
    "carriage\rreturn.txt",
    "tab\tand\x01control.txt",
    "trailing-newline\n",
    "spaces and ?query #hash &amp;.txt",
    "ünïcödé ✓.txt",
    "dir with\nnewline/inner.txt",
]


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings, llm=ScriptedLLM([]))) as c:
        yield c


def new_workspace(client: TestClient) -> tuple[str, Path]:
    state = client.app.state  # type: ignore[attr-defined]
    assert client.portal is not None
    cid = client.portal.call(state.store.create_conversation, "1", "files")
    workspace = state.manager.workspace("1", cid)
    workspace.mkdir(parents=True)
    return cid, workspace


def test_every_listed_file_downloads_whatever_its_name(client: TestClient) -> None:
    cid, workspace = new_workspace(client)
    for i, name in enumerate(ODD_NAMES):
        (workspace / name).parent.mkdir(parents=True, exist_ok=True)
        (workspace / name).write_bytes(f"content {i}".encode())
    listed = client.get(f"/api/conversations/{cid}/files").json()
    assert sorted(f["filepath"] for f in listed) == sorted(ODD_NAMES)
    for entry in listed:
        got = client.get(entry["url"])
        assert got.status_code == 200, (entry, got.text)
        assert got.content == f"content {ODD_NAMES.index(entry['filepath'])}".encode()
        assert got.headers["content-disposition"].startswith("attachment;")
        assert "\n" not in got.headers["content-disposition"]
    archive = zipfile.ZipFile(io.BytesIO(client.get(f"/api/conversations/{cid}/files.zip").content))
    assert sorted(archive.namelist()) == sorted(ODD_NAMES)


def test_undecodable_names_are_left_out_not_a_500(client: TestClient) -> None:
    cid, workspace = new_workspace(client)
    (workspace / "ok.txt").write_text("ok")
    os.close(os.open(os.fsencode(workspace) + b"/bad-\xff.txt", os.O_CREAT | os.O_WRONLY))
    listed = client.get(f"/api/conversations/{cid}/files")
    assert listed.status_code == 200
    assert [f["filepath"] for f in listed.json()] == ["ok.txt"]
    assert client.get(f"/api/conversations/{cid}/files.zip").status_code == 200


def test_nothing_outside_the_workspace_is_served(client: TestClient, tmp_path: Path) -> None:
    cid, workspace = new_workspace(client)
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret")
    os.symlink(secret, workspace / "link.txt")
    os.symlink(tmp_path, workspace / "dirlink")
    os.mkfifo(workspace / "fifo")  # would block a reader that opens it blindly
    for path in ("link.txt", "dirlink/secret.txt", "..%2F..%2Fsecret.txt", "fifo", "nope"):
        got = client.get(f"/api/files/{cid}/{path}")
        assert got.status_code == 404, path
        assert "host secret" not in got.text
    assert client.get(f"/api/conversations/{cid}/files").json() == []
    archive = zipfile.ZipFile(io.BytesIO(client.get(f"/api/conversations/{cid}/files.zip").content))
    assert archive.namelist() == []


def test_download_keeps_bytes_and_names(client: TestClient) -> None:
    cid, workspace = new_workspace(client)
    (workspace / "src").mkdir()
    data = bytes(range(256)) * 1000
    (workspace / "src" / "blob.bin").write_bytes(data)
    os.symlink("src/blob.bin", workspace / "inside-link")
    got = client.get(f"/api/files/{cid}/src/blob.bin")
    assert got.content == data
    assert got.headers["content-length"] == str(len(data))
    assert got.headers["content-disposition"] == 'attachment; filename="blob.bin"'
    assert client.get(f"/api/files/{cid}/inside-link").content == data
    assert client.get(f"/api/files/{cid}/src").status_code == 404
