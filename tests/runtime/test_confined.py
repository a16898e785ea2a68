"""backend.runtime.confined: resolution beneath a root, with openat2 and with the walk."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from backend.runtime import confined
from backend.runtime.paths import PathEscapeError


@pytest.fixture(params=["openat2", "walk"], autouse=True)
def resolution(request: pytest.FixtureRequest) -> Iterator[str]:
    confined.use_openat2(False if request.param == "walk" else None)
    yield request.param
    confined.use_openat2(None)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "a.txt").write_text("A")
    (tmp_path / "outside.txt").write_text("OUT")
    return ws


def read(root: Path, path: str) -> tuple[bytes, str]:
    fd, rel = confined.open_read(root, path)
    try:
        return confined.read_fd(fd, 1 << 20), rel
    finally:
        os.close(fd)


def test_relative_parts(root: Path) -> None:
    assert confined.relative_parts(root, "src/a.txt") == ["src", "a.txt"]
    assert confined.relative_parts(root, "/workspace/src/./a.txt") == ["src", "a.txt"]
    assert confined.relative_parts(root, "/workspace") == []
    assert confined.relative_parts(root, str(root / "src")) == ["src"]
    assert confined.relative_parts(root, "a/../b") == ["b"]
    assert confined.relative_parts(root, "  ") == []
    assert confined.relative_parts(root, "name \n") == ["name \n"]
    for bad in ("../x", "a/../../x", "/etc/passwd", "/workspacex/a", str(root) + "x/a", "a\x00"):
        with pytest.raises(PathEscapeError):
            confined.relative_parts(root, bad)


def test_symlinks_inside_are_followed(root: Path) -> None:
    os.symlink("src", root / "rel-dir")
    os.symlink("src/a.txt", root / "rel-file")
    os.symlink("/workspace/src/a.txt", root / "sandbox-abs")  # made in the sandbox
    os.symlink(root / "src" / "a.txt", root / "host-abs")  # made by a local command
    os.symlink("../src/a.txt", root / "src" / "up")
    for path in ("rel-dir/a.txt", "rel-file", "sandbox-abs", "host-abs", "src/up"):
        assert read(root, path) == (b"A", "src/a.txt"), path


def test_symlinks_leaving_are_refused(root: Path, tmp_path: Path) -> None:
    os.symlink(tmp_path / "outside.txt", root / "abs-out")
    os.symlink("../outside.txt", root / "rel-out")
    os.symlink("src/../../outside.txt", root / "deep-out")
    os.symlink(tmp_path, root / "dir-out")
    os.symlink("/proc/self/root/etc/passwd", root / "magic")
    for path in ("abs-out", "rel-out", "deep-out", "dir-out/outside.txt", "magic"):
        with pytest.raises(PathEscapeError):
            confined.open_read(root, path)
        with pytest.raises(PathEscapeError):
            confined.write_atomic(root, path, b"pwned")
    assert (tmp_path / "outside.txt").read_text() == "OUT"


def test_symlink_loops_fail(root: Path) -> None:
    os.symlink("loop2", root / "loop1")
    os.symlink("loop1", root / "loop2")
    with pytest.raises(OSError) as info:
        confined.open_read(root, "loop1/x")
    assert info.value.errno == errno.ELOOP


def test_not_regular_files_are_refused_without_blocking(root: Path) -> None:
    os.mkfifo(root / "fifo")
    with pytest.raises(OSError) as info:
        confined.open_read(root, "fifo")  # a blind open() would wait for a writer forever
    assert info.value.errno == errno.EINVAL
    with pytest.raises(IsADirectoryError):
        confined.open_read(root, "src")
    with pytest.raises(NotADirectoryError):
        confined.open_read(root, "src/a.txt/x")
    with pytest.raises(FileNotFoundError):
        confined.open_read(root, "src/none")


def test_write_makes_parents_replaces_atomically_and_keeps_modes(root: Path) -> None:
    assert confined.write_atomic(root, "new/deep/f.txt", b"one") == "new/deep/f.txt"
    assert (root / "new" / "deep" / "f.txt").read_bytes() == b"one"
    os.chmod(root / "new" / "deep" / "f.txt", 0o750)
    inode = (root / "new" / "deep" / "f.txt").stat().st_ino
    assert confined.write_atomic(root, "new/deep/f.txt", b"two") == "new/deep/f.txt"
    st = (root / "new" / "deep" / "f.txt").stat()
    assert (st.st_mode & 0o777, st.st_ino != inode) == (0o750, True)
    os.symlink("new/deep/f.txt", root / "link")
    assert confined.write_atomic(root, "link", b"three") == "new/deep/f.txt"
    assert (root / "link").is_symlink()
    assert (root / "new" / "deep" / "f.txt").read_bytes() == b"three"
    with pytest.raises(IsADirectoryError):
        confined.write_atomic(root, "src", b"x")
    assert [p.name for p in (root / "new" / "deep").iterdir()] == ["f.txt"]  # no temp left


@pytest.mark.skipif(os.geteuid() != 0, reason="giving files away needs root")
def test_write_gives_new_files_and_folders_to_the_owner(root: Path) -> None:
    confined.write_atomic(root, "made/by/server.txt", b"x", owner=(4321, 4322))
    for rel in ("made", "made/by", "made/by/server.txt"):
        st = (root / rel).stat()
        assert (st.st_uid, st.st_gid) == (4321, 4322), rel


def test_edit_exact(root: Path) -> None:
    done = confined.edit_exact(root, "src/a.txt", b"A", b"BB")
    assert (done.rel, done.count) == ("src/a.txt", 1)
    assert (root / "src" / "a.txt").read_bytes() == b"BB"
    assert confined.edit_exact(root, "src/a.txt", b"B", b"C").count == 2
    assert confined.count_occurrences(b"aaaa", b"aa") == 3
    with pytest.raises(OSError) as info:
        confined.edit_exact(root, "src/a.txt", b"BB", b"x" * 100, max_total=50, used=2)
    assert info.value.errno == errno.EDQUOT
    assert (root / "src" / "a.txt").read_bytes() == b"BB"


def test_usage_and_scan(root: Path, tmp_path: Path) -> None:
    (root / "big.bin").write_bytes(b"x" * 1000)
    os.link(root / "big.bin", root / "hard.bin")
    os.symlink(tmp_path / "outside.txt", root / "out-link")
    os.symlink(tmp_path, root / "out-dir")
    (root / "node_modules").mkdir()
    (root / "node_modules" / "m.js").write_text("js")
    os.close(os.open(os.fsencode(root) + b"/bad-\xff", os.O_CREAT | os.O_WRONLY))
    assert confined.usage(root) == 1 + 1000 + 2  # a.txt, big.bin once, m.js
    files = confined.scan(root, frozenset({"node_modules"}))
    assert sorted(files) == ["big.bin", "hard.bin", "src/a.txt"]
    assert files["src/a.txt"][0] == 1
    assert confined.usage(root / "missing") == 0
    assert confined.scan(root / "missing") == {}


async def test_the_off_loop_scan_answers_as_the_scan_does(tmp_path: Path) -> None:
    from backend.workspace import scan, scan_off_loop

    missing, empty, full = tmp_path / "missing", tmp_path / "empty", tmp_path / "full"
    empty.mkdir()
    (full / "sub").mkdir(parents=True)
    (full / "a.txt").write_text("a")
    (full / "sub" / "b.txt").write_text("bb")
    (tmp_path / "file").write_text("not a folder")
    assert await scan_off_loop(missing) == {} == scan(missing)
    assert await scan_off_loop(empty) == {} == scan(empty)
    assert await scan_off_loop(tmp_path / "file") == {} == scan(tmp_path / "file")
    found = await scan_off_loop(full)
    assert found == scan(full) and sorted(found) == ["a.txt", "sub/b.txt"]
