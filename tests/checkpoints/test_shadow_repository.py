"""The shadow repository (the `git` program) over a real workspace: byte-exact whatever the
workspace's own git attributes say, empty folders kept, a repository the agent made left
alone, and CHECKPOINT_MAX_MB pruning the oldest first."""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from backend.checkpoints import CheckpointNotFound, Checkpoints
from backend.checkpoints.gitrepo import GitRepo
from backend.observe.metrics import CHECKPOINTS
from backend.store.repo import Store
from tests.migrated import place_migrated


def tree(root: Path) -> dict[str, object]:
    out: dict[str, object] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = str(path.relative_to(root))
            if path.is_symlink():
                out[rel] = ("link", os.readlink(path))
            elif path.is_dir():
                out[rel] = "dir"
            else:
                out[rel] = path.read_bytes()
    return out


def test_what_the_workspace_says_of_its_own_files_changes_no_byte(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / ".gitattributes").write_text("* text eol=crlf\n*.txt filter=evil ident\n")
    (ws / "a.txt").write_bytes(b"line\nnext\r\n$Id$\n")
    (ws / "keep").mkdir()  # an empty folder
    (ws / "odd\nname").write_bytes(b"\x00\xff")
    repo = GitRepo(tmp_path / "repo.git", ws)
    first = repo.snapshot()
    before = tree(ws)
    (ws / "a.txt").write_bytes(b"changed")
    (ws / "keep").rmdir()
    (ws / "new").mkdir()
    (ws / "odd\nname").unlink()
    repo.restore(first.commit)
    assert tree(ws) == before


def test_a_repository_the_agent_made_is_left_out_and_left_alone(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "proj" / ".git").mkdir(parents=True)
    (ws / "proj" / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (ws / "proj" / "app.py").write_text("print(1)\n")
    repo = GitRepo(tmp_path / "repo.git", ws)
    snap = repo.snapshot()
    assert [p for p, _m, _s in repo.files(snap.commit)] == ["proj/app.py"]
    (ws / "proj" / "app.py").write_text("print(2)\n")
    repo.restore(snap.commit)
    assert (ws / "proj" / "app.py").read_text() == "print(1)\n"
    assert (ws / "proj" / ".git" / "HEAD").read_text() == "ref: refs/heads/main\n"


def test_an_unchanged_file_is_not_read_again(tmp_path: Path) -> None:
    """git's index keeps the stat data: a later checkpoint stores only what changed."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "big.bin").write_bytes(os.urandom(2_000_000))
    (ws / "small.txt").write_text("a\n")
    repo = GitRepo(tmp_path / "repo.git", ws)
    first = repo.snapshot()
    (ws / "small.txt").write_text("b\n")
    second = repo.snapshot()
    added = repo.disk_usage(second.commit, [first.commit])
    assert added < 64 * 1024
    assert [c.path for c in repo.changes(first.commit, second.commit)] == ["small.txt"]


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    place_migrated(tmp_path / "db.sqlite")
    s = Store(f"sqlite:///{tmp_path}/db.sqlite")
    yield s
    await s.close()


async def test_past_checkpoint_max_mb_the_oldest_are_pruned_first(
    tmp_path: Path, store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    cid = await store.create_conversation("1", "t")
    ws = tmp_path / "ws"
    ws.mkdir()
    service = Checkpoints(tmp_path / "cps", store, max_mb=1.5)
    repo = service.repo("1", cid, ws)
    pruned_before = CHECKPOINTS.labels("pruned")._value.get()
    seqs = []
    for i in range(4):  # 600 KB of fresh, incompressible bytes each time
        (ws / f"f{i}.bin").write_bytes(os.urandom(600_000))
        if i:
            (ws / f"f{i - 1}.bin").unlink()
        seq = 10 * (i + 1)
        with caplog.at_level(logging.INFO, logger="backend.checkpoints.service"):
            taken = await service.take(repo, cid, "r", seq, f"step {i}")
        assert taken is not None
        seqs.append(seq)
    kept = [c.seq for c in await store.checkpoints_of(cid)]
    assert kept[-1] == 40 and len(kept) < 4
    assert kept == seqs[len(seqs) - len(kept) :]  # the oldest went first
    assert repo.objects_bytes() <= 1.5 * 1024 * 1024
    pruned = CHECKPOINTS.labels("pruned")._value.get() - pruned_before
    assert pruned == 4 - len(kept)
    assert "pruned" in caplog.text and "CHECKPOINT_MAX_MB" in caplog.text
    # what is left still restores
    (ws / "f3.bin").unlink()
    service2 = await service.rewind(repo, cid, 40, _nothing)
    assert service2 == 1 and (ws / "f3.bin").stat().st_size == 600_000


async def _nothing() -> None:
    return None


async def test_nothing_changed_no_checkpoint_unless_the_run_ends(
    tmp_path: Path, store: Store
) -> None:
    cid = await store.create_conversation("1", "t")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a").write_text("a")
    service = Checkpoints(tmp_path / "cps", store, max_mb=10)
    repo = service.repo("1", cid, ws)
    assert await service.take(repo, cid, "r", 1, "write") is not None
    assert await service.take(repo, cid, "r", 2, "read") is None
    end = await service.take(repo, cid, "r", 3, "end of run", always=True)
    assert end is not None and end.files_changed == 0
    assert await service.take(repo, cid, "r", 3, "again", always=True) is None  # same seq
    assert (tmp_path / "cps" / "user_1" / f"{cid}.git" / "HEAD").is_file()


async def test_a_workspace_that_held_nothing_is_checkpointed_without_a_repository(
    tmp_path: Path, store: Store
) -> None:
    """A conversation of questions and answers: its end-of-run checkpoints make no
    repository (no git command at all), and they are places to go back to like any other."""
    cid = await store.create_conversation("1", "t")
    ws = tmp_path / "ws"  # never made: no command ran
    service = Checkpoints(tmp_path / "cps", store, max_mb=10)
    repo = service.repo("1", cid, ws)
    first = await service.take(repo, cid, "r", 2, "end of run", always=True)
    again = await service.take(repo, cid, "r", 4, "end of run", always=True)
    assert first is not None and again is not None
    assert (first.files_changed, again.files_changed, first.bytes) == (0, 0, 0)
    assert not repo.git_dir.exists()
    # then files: the next checkpoint lists them as added, the empty one restores and forks
    ws.mkdir()
    (ws / "a.txt").write_text("a")
    (ws / "d").mkdir()
    later = await service.take(repo, cid, "r", 6, "write")
    assert later is not None and later.files_changed == 1
    assert [(f.path, f.change) for f in await service.diff(repo, cid, 2, 6)] == [("a.txt", "added")]
    new = await service.fork("1", repo, cid, 4, "t", lambda n: tmp_path / "forks" / n)
    assert tree(tmp_path / "forks" / new) == {}
    assert await service.rewind(repo, cid, 2, _nothing) == 0
    assert tree(ws) == {}
    assert [(f.path, f.change) for f in await service.diff(repo, cid, 6, None)] == [
        ("a.txt", "removed")
    ]
    assert await service.rewind(repo, cid, 6, _nothing) == 1  # a redo
    assert tree(ws) == {"a.txt": b"a", "d": "dir"}


def test_a_path_read_from_a_checkpoint_is_taken_literally(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "d").mkdir(parents=True)
    (ws / "d" / "secret.txt").write_text("s")
    (ws / "a.txt").write_text("a")
    repo = GitRepo(tmp_path / "repo.git", ws)
    commit = repo.snapshot().commit
    assert repo.entry(commit, "a.txt") is not None
    for pattern in ("*.txt", ":(glob)**/secret.txt", "d/*", "../a.txt", "d"):
        found = repo.entry(commit, pattern)
        assert found is None or found[0] == "040000", pattern


async def test_a_shared_file_is_streamed_in_chunks_byte_for_byte(
    tmp_path: Path, store: Store
) -> None:
    cid = await store.create_conversation("1", "t")
    ws = tmp_path / "ws"
    ws.mkdir()
    data = os.urandom(1_000_000)
    (ws / "big.bin").write_bytes(data)
    os.symlink("/etc/passwd", ws / "link")
    service = Checkpoints(tmp_path / "cps", store, max_mb=10)
    repo = service.repo("1", cid, ws)
    share = await service.share(repo, "1", cid, "t")
    (ws / "big.bin").write_bytes(b"changed later")  # the share is a snapshot
    size, body = await service.shared_file(repo, share, "big.bin")
    chunks = [c async for c in body]
    assert size == len(data) and len(chunks) > 1 and b"".join(chunks) == data
    listed = {f.path: f.link for f in await service.shared_files(repo, share)}
    assert listed == {"big.bin": False, "link": True}
    with pytest.raises(CheckpointNotFound):  # a link is never served
        await service.shared_file(repo, share, "link")
