"""File access beneath a root directory that a concurrent process cannot race.

Every operation starts from an open file descriptor of the root and reaches its target
through descriptors, never through a path string the kernel would resolve again: a symlink
swapped in while an action runs cannot lead outside (CONTRACT section 5).

Resolution follows symlinks that stay inside the root (a relative target, or an absolute one
under ``/workspace`` or under the root's own path) and refuses every other one. Two ways:

- ``openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`` (Linux >= 5.6, called through ctypes):
  the kernel refuses, atomically, any step that leaves the root. The fast path.
- a walk component by component (``O_NOFOLLOW | O_DIRECTORY`` relative to the previous
  directory's descriptor, symlinks read with ``readlinkat`` and resolved here, ``..`` popping a
  stack of held descriptors). Used where openat2 is missing, for absolute in-root symlinks, and
  to create missing parent directories.

The last step is always an ``*at`` call on the parent directory's descriptor with
``O_NOFOLLOW`` (open), ``AT_SYMLINK_NOFOLLOW`` (stat) or ``renameat`` (which replaces a
symlink, never what it points to). Written files go to a temporary file created with
``O_EXCL`` in that directory, then renamed over the target.

Functions raise :class:`PathEscapeError` for a path leaving the root, ``OSError`` otherwise.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import posixpath
import secrets
import stat
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from backend.runtime.paths import SANDBOX_ROOT, PathEscapeError

__all__ = [
    "Located",
    "PathEscapeError",
    "edit_exact",
    "file_size",
    "iter_fd",
    "open_dir",
    "open_read",
    "open_root",
    "relative_parts",
    "scan",
    "usage",
    "write_atomic",
]

MAX_HOPS = 40  # symlinks followed in one resolution (the kernel's limit)
CHUNK = 1 << 16
EDIT_MAX = 16 * 1024 * 1024  # bytes: edit_file reads the whole file into memory

_O_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_O_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC

# ---- openat2 --------------------------------------------------------------------------

_SYS_OPENAT2 = 437  # the same number on every architecture (added in Linux 5.6)
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_BENEATH = 0x08


class _OpenHow(ctypes.Structure):
    _fields_ = [
        ("flags", ctypes.c_uint64),
        ("mode", ctypes.c_uint64),
        ("resolve", ctypes.c_uint64),
    ]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_openat2_works: bool | None = None  # None: not tried yet; set False to force the walk


def use_openat2(enabled: bool | None) -> None:
    """Force the walk (False) or probe the kernel again (None). For tests and benchmarks."""
    global _openat2_works
    _openat2_works = enabled


def _openat2(dir_fd: int, path: str, flags: int) -> int:
    how = _OpenHow(flags | os.O_CLOEXEC, 0, _RESOLVE_BENEATH | _RESOLVE_NO_MAGICLINKS)
    fd = _libc.syscall(
        ctypes.c_long(_SYS_OPENAT2),
        ctypes.c_int(dir_fd),
        ctypes.c_char_p(os.fsencode(path)),
        ctypes.byref(how),
        ctypes.c_size_t(ctypes.sizeof(how)),
    )
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), path)
    return int(fd)


def _try_openat2(dir_fd: int, path: str, flags: int) -> int | None:
    """An fd, or None when the walk must decide (no openat2, or a symlink to examine)."""
    global _openat2_works
    if _openat2_works is False:
        return None
    try:
        fd = _openat2(dir_fd, path, flags)
    except OSError as exc:
        if exc.errno in (errno.ENOSYS, errno.EPERM, errno.E2BIG):  # old kernel or seccomp
            _openat2_works = False
            return None
        if exc.errno in (errno.EXDEV, errno.ELOOP, errno.EAGAIN):
            return None  # leaves the root, an absolute symlink, or a rename raced: walk
        raise
    _openat2_works = True
    return fd


# ---- paths ------------------------------------------------------------------------------


def open_root(root: Path | str) -> int:
    """A descriptor of the root directory (the caller closes it)."""
    return os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


def relative_parts(root: Path | str, path: str) -> list[str]:
    """An action's path as components below ``root`` (``..`` resolved lexically).

    Relative paths are relative to the root; ``/workspace/...`` names the root; any other
    absolute path is accepted only when it lies inside the root.
    """
    if "\x00" in path:
        raise PathEscapeError(f"path {path!r} contains a NUL byte")
    raw = path if path.strip() else "."  # exact: a name may end in a space or newline
    if raw.startswith("/"):
        norm = posixpath.normpath(raw)
        inside = _under(norm, str(SANDBOX_ROOT))
        if inside is None:
            for base in {os.path.realpath(root), os.path.abspath(root)}:
                inside = _under(norm, base)
                if inside is not None:
                    break
        if inside is None:
            raise PathEscapeError(f"path {path!r} is outside the workspace")
        raw = inside or "."
    # ".." is taken lexically ("a/../b" is "b"): nothing is made or opened on the way
    norm = posixpath.normpath(raw)
    if norm == ".." or norm.startswith("../"):
        raise PathEscapeError(f"path {path!r} is outside the workspace")
    return [part for part in norm.split("/") if part not in ("", ".")]


def _under(path: str, base: str) -> str | None:
    """``path`` relative to ``base`` ('' for base itself), or None when not below it."""
    base = base.rstrip("/") or "/"
    if path == base:
        return ""
    prefix = base if base.endswith("/") else base + "/"
    return path[len(prefix) :] if path.startswith(prefix) else None


def _fd_parts(fd: int, root_real: str) -> list[str] | None:
    """Where an open directory is now, as components below the root (for naming only)."""
    try:
        where = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None
    inside = _under(where, root_real)
    if inside is None:
        return None
    return [p for p in inside.split("/") if p]


@dataclass
class Located:
    """An entry below the root: the descriptor of its directory and its name in it.

    ``name`` is "." when the path names a directory itself (the root, or a path ending in
    ``..``). ``parts`` is its workspace-relative name, for messages and results.
    """

    dir_fd: int
    name: str
    parts: list[str]

    @property
    def rel(self) -> str:
        return "/".join(self.parts) or "."

    def close(self) -> None:
        os.close(self.dir_fd)

    def lstat(self) -> os.stat_result | None:
        try:
            return os.stat(self.name, dir_fd=self.dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return None


def _locate(
    root_fd: int,
    root_real: str,
    parts: list[str],
    *,
    create: bool = False,
    owner: tuple[int, int] | None = None,
) -> Located:
    """Find the entry ``parts`` names, following in-root symlinks, without any race."""
    if parts and parts[-1] != "..":
        parent = "/".join(parts[:-1]) or "."
        try:
            fd = _try_openat2(root_fd, parent, os.O_RDONLY | os.O_DIRECTORY)
        except FileNotFoundError:
            if not create:
                raise
            fd = None  # parents to make: the walk makes them
        if fd is not None:
            try:
                st = os.stat(parts[-1], dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                st = None
            except BaseException:
                os.close(fd)
                raise
            if st is None or not stat.S_ISLNK(st.st_mode):
                where = _fd_parts(fd, root_real)
                if where is None:
                    where = [p for p in posixpath.normpath(parent).split("/") if p != "."]
                return Located(fd, parts[-1], [*where, parts[-1]])
            os.close(fd)  # the last component is a symlink: the walk follows it
    return _walk(root_fd, root_real, parts, create=create, owner=owner)


def _walk(
    root_fd: int,
    root_real: str,
    parts: list[str],
    *,
    create: bool,
    owner: tuple[int, int] | None,
) -> Located:
    stack = [os.dup(root_fd)]
    names: list[str] = []
    todo = deque(parts)
    hops = 0
    try:
        while todo:
            comp = todo.popleft()
            if comp in ("", "."):
                continue
            if comp == "..":
                if not names:
                    raise PathEscapeError("path goes above the workspace")
                os.close(stack.pop())
                names.pop()
                continue
            cur = stack[-1]
            if not todo:  # the last component: follow it only if it is a symlink
                try:
                    st = os.stat(comp, dir_fd=cur, follow_symlinks=False)
                except FileNotFoundError:
                    st = None
                if st is None or not stat.S_ISLNK(st.st_mode):
                    return Located(os.dup(cur), comp, [*names, comp])
            try:
                fd = os.open(comp, _O_DIR, dir_fd=cur)
            except FileNotFoundError:
                if not create or not todo:
                    raise
                hops += 1
                if hops > MAX_HOPS:
                    raise
                try:
                    os.mkdir(comp, 0o755, dir_fd=cur)
                except FileExistsError:
                    pass  # made meanwhile: open it on the next turn
                else:
                    if owner is not None:
                        os.chown(comp, *owner, dir_fd=cur, follow_symlinks=False)
                todo.appendleft(comp)
                continue
            except OSError as exc:
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                st = os.stat(comp, dir_fd=cur, follow_symlinks=False)
                if not stat.S_ISLNK(st.st_mode):
                    raise NotADirectoryError(errno.ENOTDIR, "Not a directory", comp) from None
                hops += 1
                if hops > MAX_HOPS:
                    raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), comp) from None
                target = os.readlink(comp, dir_fd=cur)
                if target.startswith("/"):
                    inside = _under(posixpath.normpath(target), str(SANDBOX_ROOT))
                    if inside is None:
                        inside = _under(posixpath.normpath(target), root_real)
                    if inside is None:
                        raise PathEscapeError("a symlink leads outside the workspace") from None
                    while len(stack) > 1:
                        os.close(stack.pop())
                    names.clear()
                    target = inside
                todo.extendleft(reversed([p for p in target.split("/") if p]))
                continue
            stack.append(fd)
            names.append(comp)
        return Located(os.dup(stack[-1]), ".", names)
    finally:
        for fd in stack:
            os.close(fd)


@contextlib.contextmanager
def located(
    root: Path | str,
    path: str,
    *,
    create: bool = False,
    owner: tuple[int, int] | None = None,
) -> Iterator[Located]:
    """Context manager: the :class:`Located` entry ``path`` names below ``root``."""
    parts = relative_parts(root, path)
    root_fd = open_root(root)
    try:
        loc = _locate(root_fd, os.path.realpath(root), parts, create=create, owner=owner)
    except PathEscapeError:
        # one message whatever the way out (a symlink's target is not shown)
        raise PathEscapeError(f"path {path!r} is outside the workspace") from None
    finally:
        os.close(root_fd)
    try:
        yield loc
    finally:
        loc.close()


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
