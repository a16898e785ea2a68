"""Resolving a path beneath a root directory through descriptors (:mod:`.confined`'s base).

Resolution follows symlinks that stay inside the root (a relative target, or an absolute one
under ``/workspace`` or under the root's own path) and refuses every other one. Two ways:

- ``openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`` (Linux >= 5.6, called through ctypes):
  the kernel refuses, atomically, any step that leaves the root. The fast path.
- a walk component by component (``O_NOFOLLOW | O_DIRECTORY`` relative to the previous
  directory's descriptor, symlinks read with ``readlinkat`` and resolved here, ``..`` popping a
  stack of held descriptors). Used where openat2 is missing, for absolute in-root symlinks, and
  to create missing parent directories.

:func:`located` gives the parent directory's descriptor and the last name; the operations in
:mod:`.confined` finish with an ``*at`` call on it.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import posixpath
import stat
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from backend.runtime.paths import SANDBOX_ROOT, PathEscapeError

MAX_HOPS = 40  # symlinks followed in one resolution (the kernel's limit)

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
