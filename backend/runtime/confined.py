"""File access beneath a root directory that a concurrent process cannot race.

Every operation starts from an open file descriptor of the root and reaches its target
through descriptors, never through a path string the kernel would resolve again: a symlink
swapped in while an action runs cannot lead outside (docs/api.md "Actions and paths").

Resolution (openat2 ``RESOLVE_BENEATH``, or a walk component by component) is
:mod:`backend.runtime.beneath`'s.

The last step is always an ``*at`` call on the parent directory's descriptor with
``O_NOFOLLOW`` (open), ``AT_SYMLINK_NOFOLLOW`` (stat) or ``renameat`` (which replaces a
symlink, never what it points to). Written files go to a temporary file created with
``O_EXCL`` in that directory, then renamed over the target.

Functions raise :class:`PathEscapeError` for a path leaving the root, ``OSError`` otherwise.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from backend.runtime.beneath import (
    _O_DIR,
    _O_READ,
    Located,
    located,
    open_root,
    relative_parts,
    use_openat2,
)
from backend.runtime.diffs import edit_diff
from backend.runtime.paths import PathEscapeError

__all__ = [
    "Located",
    "PathEscapeError",
    "edit_exact",
    "file_size",
    "iter_fd",
    "located",
    "open_dir",
    "open_read",
    "open_root",
    "relative_parts",
    "scan",
    "usage",
    "use_openat2",
    "write_atomic",
]

CHUNK = 1 << 16
EDIT_MAX = 16 * 1024 * 1024  # bytes: edit_file reads the whole file into memory


# ---- operations -------------------------------------------------------------------------


def open_read(root: Path | str, path: str) -> tuple[int, str]:
    """Open a regular file below ``root`` for reading: (fd, workspace-relative name).

    FileNotFoundError when missing, IsADirectoryError for a directory, OSError(EINVAL) for
    anything else that is not a regular file (a FIFO, a socket, a device).
    """
    with located(root, path) as loc:
        fd, _st = _open_regular(loc, path)
        return fd, loc.rel


def _open_regular(loc: Located, path: str) -> tuple[int, os.stat_result]:
    """Open ``loc`` for reading without following a symlink swapped in meanwhile; only a
    regular file (IsADirectoryError for a folder, OSError EINVAL for anything else)."""
    if loc.name == ".":
        raise IsADirectoryError(errno.EISDIR, "Is a directory", loc.rel)
    try:
        fd = os.open(loc.name, _O_READ, dir_fd=loc.dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # became a symlink after we looked: refuse
            raise PathEscapeError(f"path {path!r} changed while it was opened") from None
        raise
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, "Is a directory", loc.rel)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "Not a regular file", loc.rel)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def open_dir(root: Path | str, path: str) -> tuple[int, str]:
    """Open a directory below ``root``: (fd, workspace-relative name)."""
    with located(root, path) as loc:
        if loc.name == ".":
            return os.dup(loc.dir_fd), loc.rel
        try:
            return os.open(loc.name, _O_DIR, dir_fd=loc.dir_fd), loc.rel
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise PathEscapeError(f"path {path!r} changed while it was opened") from None
            raise


def read_fd(fd: int, limit: int) -> bytes:
    chunks: list[bytes] = []
    left = limit
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def iter_fd(fd: int, chunk: int = CHUNK) -> Iterator[bytes]:
    """Yield a file's bytes from its descriptor, closing it at the end."""
    try:
        while data := os.read(fd, chunk):
            yield data
    finally:
        os.close(fd)


def file_size(root: Path | str, path: str) -> tuple[int | None, str]:
    """Size of the regular file ``path`` names (None when there is none), and its name."""
    try:
        with located(root, path) as loc:
            st = loc.lstat() if loc.name != "." else None
            if st is None or not stat.S_ISREG(st.st_mode):
                return None, loc.rel
            return st.st_size, loc.rel
    except (FileNotFoundError, NotADirectoryError):
        return None, "/".join(relative_parts(root, path)) or "."


def replace_in(loc: Located, data: bytes | BinaryIO, owner: tuple[int, int] | None) -> int:
    """Write ``data`` (bytes, or a binary file read to its end) to a new file in ``loc``'s
    directory and rename it over ``loc.name``. Returns the size written."""
    old = loc.lstat()
    if old is not None and stat.S_ISDIR(old.st_mode):
        raise IsADirectoryError(errno.EISDIR, "Is a directory", loc.rel)
    mode = 0o644
    if old is not None and stat.S_ISREG(old.st_mode):
        mode = stat.S_IMODE(old.st_mode) & 0o777
        if owner is None and os.geteuid() == 0:
            owner = (old.st_uid, old.st_gid)
    if owner is not None and owner == (os.geteuid(), os.getegid()):
        owner = None
    tmp = f".planact-{secrets.token_hex(8)}.tmp"
    fd = os.open(
        tmp,
        os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
        0o600,
        dir_fd=loc.dir_fd,
    )
    try:
        try:
            size = 0
            chunks = [data] if isinstance(data, bytes) else iter(lambda: data.read(CHUNK), b"")
            for chunk in chunks:
                view = memoryview(chunk)
                size += len(view)
                while view:
                    view = view[os.write(fd, view) :]
            if owner is not None:
                os.fchown(fd, *owner)
            os.fchmod(fd, mode)
        finally:
            os.close(fd)
        os.replace(tmp, loc.name, src_dir_fd=loc.dir_fd, dst_dir_fd=loc.dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=loc.dir_fd)
        raise
    return size


def write_atomic(
    root: Path | str, path: str, data: bytes | BinaryIO, owner: tuple[int, int] | None = None
) -> str:
    """Write ``data`` (bytes, or a binary file read to its end) to ``path`` below ``root``
    (parents made, given to ``owner``).

    The file is replaced atomically; an existing file keeps its permission bits. Returns the
    workspace-relative name of the file written (a symlink inside is written through).
    """
    with located(root, path, create=True, owner=owner) as loc:
        if loc.name == ".":
            raise IsADirectoryError(errno.EISDIR, "Is a directory", loc.rel)
        replace_in(loc, data, owner)
        return loc.rel


@dataclass
class EditOutcome:
    rel: str
    count: int  # occurrences of the old text (the file is changed only when it is 1)
    old_size: int = 0
    new_size: int = 0
    diff: str = ""  # the change as a unified diff (capped), when it was made


def count_occurrences(data: bytes, needle: bytes, stop: int = 1000) -> int:
    """How many places ``needle`` starts at in ``data`` (overlaps counted), up to ``stop``."""
    count, at = 0, data.find(needle)
    while at >= 0 and count < stop:
        count += 1
        at = data.find(needle, at + 1)
    return count


def edit_exact(
    root: Path | str,
    path: str,
    old: bytes,
    new: bytes,
    owner: tuple[int, int] | None = None,
    max_total: int | None = None,
    used: int = 0,
) -> EditOutcome:
    """Replace the one occurrence of ``old`` in the file ``path`` names by ``new``.

    The file is changed only when ``old`` occurs exactly once; ``count`` says how often it
    does. ``max_total``/``used``: refuse (OSError EDQUOT) when the workspace would grow over it.
    """
    with located(root, path) as loc:
        fd, st = _open_regular(loc, path)
        try:
            if st.st_size > EDIT_MAX:
                raise OSError(errno.EFBIG, "File too large", loc.rel)
            data = read_fd(fd, st.st_size + 1)
        finally:
            os.close(fd)
        count = count_occurrences(data, old)
        outcome = EditOutcome(loc.rel, count, old_size=len(data))
        if count != 1:
            return outcome
        at = data.find(old)
        changed = data[:at] + new + data[at + len(old) :]
        outcome.new_size = len(changed)
        outcome.diff = edit_diff(loc.rel, data, at, len(old), new)
        if max_total is not None and used - len(data) + len(changed) > max_total:
            raise OSError(errno.EDQUOT, "workspace size limit", loc.rel)
        replace_in(loc, changed, owner)
        return outcome


# ---- whole-tree views -------------------------------------------------------------------


def _fwalk(root: Path | str) -> Iterator[tuple[str, list[str], list[str], int]]:
    """os.fwalk over the root: descriptor-based, never follows a symlink (race-safe)."""
    return os.fwalk(str(root), follow_symlinks=False)


def usage(root: Path | str) -> int:
    """Bytes held by the regular files below ``root`` (hard links counted once)."""
    if not os.path.isdir(root):
        return 0
    total = 0
    seen: set[tuple[int, int]] = set()
    for _dirpath, _dirs, files, dir_fd in _fwalk(root):
        for name in files:
            try:
                st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            if st.st_nlink > 1:
                key = (st.st_dev, st.st_ino)
                if key in seen:
                    continue
                seen.add(key)
            total += st.st_size
    return total


def scan(
    root: Path | str, skip_dirs: frozenset[str] = frozenset(), max_files: int = 5000
) -> dict[str, tuple[int, int]]:
    """relative path -> (size, mtime_ns) of regular files below ``root``, sorted walk.

    Names that are not valid UTF-8 are left out (no URL or JSON string can carry them).
    """
    out: dict[str, tuple[int, int]] = {}
    if not os.path.isdir(root):
        return out
    top = str(root)
    for dirpath, dirs, files, dir_fd in _fwalk(root):
        dirs[:] = sorted(d for d in dirs if d not in skip_dirs and _utf8(d))
        rel_dir = os.path.relpath(dirpath, top)
        for name in sorted(files):
            if not _utf8(name):
                continue
            try:
                st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            rel = name if rel_dir == "." else f"{rel_dir}/{name}"
            out[rel] = (st.st_size, st.st_mtime_ns)
            if len(out) >= max_files:
                return out
    return out


def _utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
