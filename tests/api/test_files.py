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


def test_the_zip_round_trips_every_byte_nested_folders_and_modes(client: TestClient) -> None:
    cid, workspace = new_workspace(client)
    blobs = {
        "top.txt": b"top\n",
        "a/b/c/deep.bin": os.urandom(300_000),  # several chunks, incompressible
        "a/zeros.bin": bytes(2_000_000),  # compresses a thousandfold
        "a/b/empty.txt": b"",
        "script.sh": b"#!/bin/sh\necho hi\n",
    }
    for rel, data in blobs.items():
        (workspace / rel).parent.mkdir(parents=True, exist_ok=True)
        (workspace / rel).write_bytes(data)
    (workspace / "script.sh").chmod(0o755)
    os.utime(workspace / "top.txt", (7258118400, 7258118400))  # 2200: past what a zip holds
    os.utime(workspace / "a/zeros.bin", (0, 0))  # 1970: before it
    (workspace / "empty-dir").mkdir()  # no file in it: not in the zip (as the list)
    got = client.get(f"/api/conversations/{cid}/files.zip")
    assert got.status_code == 200
    assert got.headers["content-type"] == "application/zip"
    assert got.headers["content-disposition"] == 'attachment; filename="files.zip"'
    archive = zipfile.ZipFile(io.BytesIO(got.content))
    assert archive.testzip() is None
    assert sorted(archive.namelist()) == sorted(blobs)
    for rel, data in blobs.items():
        assert archive.read(rel) == data, rel
    assert archive.getinfo("script.sh").external_attr >> 16 & 0o777 == 0o755
    assert archive.getinfo("top.txt").date_time[0] == 2038
    assert archive.getinfo("a/zeros.bin").date_time[0] == 1980
    head = client.head(f"/api/conversations/{cid}/files.zip")  # nothing zipped for it
    assert head.status_code == 200 and head.content == b""
    assert head.headers["content-type"] == "application/zip"
    assert "content-length" not in head.headers


def test_a_sparse_file_over_the_budget_is_413_before_any_zipping(
    settings: Settings, tmp_path: Path
) -> None:
    """`truncate -s 2G` costs no disk but counts its full size: the zip ran through all of
    it (in a thread no client could stop) and answered 200."""
    small = settings.model_copy(update={"workspace_max_mb": 1024})
    with TestClient(create_app(small, llm=ScriptedLLM([]))) as c:
        cid, workspace = new_workspace(c)
        (workspace / "note.txt").write_text("kept")
        with open(workspace / "s.bin", "wb") as f:
            f.truncate(2 << 30)
        assert os.stat(workspace / "s.bin").st_blocks == 0  # sparse indeed
        got = c.get(f"/api/conversations/{cid}/files.zip")
        assert got.status_code == 413
        assert got.headers["content-type"] == "application/json"
        assert "content-disposition" not in got.headers
        error = got.json()["error"]
        assert error["code"] == "too_large"
        assert "2,048 MB" in error["message"] and "WORKSPACE_MAX_MB" in error["message"]
        # under the budget again, the same workspace zips
        os.unlink(workspace / "s.bin")
        archive = zipfile.ZipFile(io.BytesIO(c.get(f"/api/conversations/{cid}/files.zip").content))
        assert archive.read("note.txt") == b"kept"


def test_files_grown_past_the_budget_or_gone_since_counted_are_left_out(tmp_path: Path) -> None:
    from backend.api.archive import WorkspaceZip, plan

    for name in ("a.txt", "b.txt", "c.txt"):
        (tmp_path / name).write_bytes(name[0].encode() * 100)
    files = plan(tmp_path, 300)
    (tmp_path / "a.txt").write_bytes(b"a" * 250)  # grew: b no longer fits the budget
    (tmp_path / "c.txt").unlink()  # gone
    job = WorkspaceZip(tmp_path, files, 300)
    data = b"".join(iter(job.next_chunk, None))
    job.close()
    archive = zipfile.ZipFile(io.BytesIO(data))
    assert archive.namelist() == ["a.txt"] and archive.read("a.txt") == b"a" * 250
    assert job.opened == set()


def test_closing_a_zip_midway_closes_every_file_it_opened(tmp_path: Path) -> None:
    from backend.api.archive import WorkspaceZip, plan

    (tmp_path / "big.bin").write_bytes(os.urandom(1_000_000))
    job = WorkspaceZip(tmp_path, plan(tmp_path, 10_000_000), 10_000_000)
    assert job.next_chunk()
    assert len(job.opened) == 1
    job.close()
    assert job.opened == set()
    assert job.next_chunk() is None  # stopped for good
