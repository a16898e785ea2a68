"""Input files a person gives a conversation: name checks, size limits, the one function
that writes an upload into the workspace (``save_upload``), and the budget lock that makes
"check the room, then write" one step (``budget_locked``)."""

from __future__ import annotations

import asyncio
import errno
import fcntl
import logging
import os
import stat
import unicodedata
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import BinaryIO, TypeVar

import anyio

from backend.runtime import confined
from backend.runtime.paths import PathEscapeError

MB = 1024 * 1024
MAX_NAME = 255
MAX_PATH = 1024

T = TypeVar("T")
log = logging.getLogger(__name__)


class UploadError(Exception):
    """An upload refused; ``status`` is the HTTP status (400 bad name, 413 too large)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class UploadLimits:
    upload_max_bytes: int
    workspace_max_bytes: int

    @classmethod
    def from_mb(cls, upload_mb: float, workspace_mb: float) -> UploadLimits:
        return cls(int(upload_mb * MB), int(workspace_mb * MB))


def _check_part(part: str, what: str) -> None:
    if part == "..":
        raise UploadError(400, f"{what} may not contain '..'.")
    for ch in part:
        if ch == "\x00" or unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp"):
            raise UploadError(400, f"{what} contains a control character ({ch!r}).")
    if len(part.encode()) > MAX_NAME:
        raise UploadError(400, f"{what} has a name longer than {MAX_NAME} bytes.")


def _parts(raw: str, what: str) -> list[str]:
    if "\\" in raw:
        raise UploadError(400, f"{what} {raw!r} contains a backslash; use '/' between folders.")
    if raw.startswith("/") or PurePosixPath(raw).is_absolute():
        raise UploadError(400, f"{what} {raw!r} is absolute; give a path inside the workspace.")
    parts = [p for p in raw.split("/") if p not in ("", ".")]
    for p in parts:
        _check_part(p, f"{what} {raw!r}")
    return parts


def cut_name(name: str, limit: int = MAX_NAME) -> str:
    """``name`` cut to at most ``limit`` bytes of UTF-8, never inside a character, keeping a
    short extension ("…long name.csv")."""
    if len(name.encode()) <= limit:
        return name
    stem, dot, ext = name.rpartition(".")
    suffix = dot + ext if stem and len(ext.encode()) <= 16 else ""
    stem = name[: len(name) - len(suffix)]
    room = limit - len(suffix.encode())
    return stem.encode()[:room].decode("utf-8", "ignore") + suffix


def upload_path(directory: str, filename: str) -> str:
    """The workspace-relative path for an uploaded file named ``filename`` in the optional
    folder ``directory``. Raises UploadError(400) for names that could leave the workspace
    or that a person could not read (``..``, absolute, NUL or other control characters)."""
    name_parts = _parts(filename, "File name")
    if len(name_parts) != 1:
        raise UploadError(
            400, f"File name {filename!r} must be a plain name; put folders in 'dir'."
        )
    rel = "/".join([*_parts(directory, "Folder"), *name_parts])
    if len(rel.encode()) > MAX_PATH:
        raise UploadError(400, f"The path {rel[:60]!r}… is longer than {MAX_PATH} bytes.")
    return rel


def check_workspace_room(workspace: Path, incoming: dict[str, int], limits: UploadLimits) -> None:
    """Raise UploadError(413) when the workspace would grow over WORKSPACE_MAX_MB, measured
    as the runtime measures it (every regular file, skipped folders and all)."""
    after = confined.usage(workspace)
    for path, size in incoming.items():
        try:
            replaced = confined.file_size(workspace, path)[0] or 0
        except (PathEscapeError, OSError):
            replaced = 0  # refused later, when it is written
        after += size - replaced
    if after > limits.workspace_max_bytes:
        raise UploadError(
            413,
            f"The conversation's workspace would hold {after / MB:.1f} MB, over its limit of "
            f"{limits.workspace_max_bytes / MB:g} MB (WORKSPACE_MAX_MB). Delete files or "
            "start a new conversation.",
        )


# -- the budget lock -----------------------------------------------------------------------
# Checking the room and writing must be one step, or concurrent uploads each see the room
# free and together pass it. The lock is an exclusive flock(2) on the folder the budget is
# about (a conversation workspace, a person's staging area): it holds across every process
# of the host that shares the volume (scaled set-up: several `planact serve`) and leaves no
# file behind. Within one process an asyncio lock per folder queues the waiters first, so
# that many uploads to one folder wait on the event loop, not in worker threads.
_process_locks: dict[str, tuple[asyncio.Lock, int]] = {}


@asynccontextmanager
async def _process_lock(key: str) -> AsyncIterator[None]:
    lock, users = _process_locks.get(key, (asyncio.Lock(), 0))
    _process_locks[key] = (lock, users + 1)
    try:
        async with lock:
            yield
    finally:
        lock, users = _process_locks[key]
        if users == 1:
            del _process_locks[key]
        else:
            _process_locks[key] = (lock, users - 1)


def with_budget_lock(folder: Path, fn: Callable[[], T]) -> T:
    """Run ``fn`` holding ``folder``'s budget lock (blocking; ``folder`` is created). Where
    the file system cannot lock a folder (NFS refuses an exclusive flock on a descriptor
    not open for writing) ``fn`` runs with the per-process lock only, said once in the log."""
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # released when fd is closed
        except OSError as exc:
            if exc.errno not in (errno.EBADF, errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL):
                raise
            _warn_unlocked(folder, exc)
        return fn()
    finally:
        os.close(fd)


_warned: set[int] = set()


def _warn_unlocked(folder: Path, exc: OSError) -> None:
    if exc.errno not in _warned:
        _warned.add(exc.errno or 0)
        log.warning(
            "cannot lock %s across processes (%s): uploads to one workspace from several "
            "processes may pass WORKSPACE_MAX_MB together",
            folder,
            exc.strerror,
        )


async def budget_locked(folder: Path, fn: Callable[[], T]) -> T:
    """Run ``fn`` (blocking file work: measure the room, then write) in a worker thread
    while holding ``folder``'s budget lock, across processes; ``folder`` is created."""
    async with _process_lock(str(folder)):
        return await anyio.to_thread.run_sync(with_budget_lock, folder, fn)


def save_upload(workspace: Path, relpath: str, source: BinaryIO) -> int:
    """Write ``source`` to ``relpath`` inside ``workspace``, atomically and without
    following a symlink out of it (backend/runtime/confined.py: the same file operations as
    the actions). Returns the size written."""
    workspace.mkdir(parents=True, exist_ok=True)
    source.seek(0)
    owner = _owner_of(workspace)
    try:
        with confined.located(workspace, relpath, create=True, owner=owner) as loc:
            if loc.name == "." or _is_dir(loc):
                raise UploadError(400, f"{relpath!r} is a folder in the workspace.")
            return confined.replace_in(loc, source, owner)
    except (PathEscapeError, FileExistsError, NotADirectoryError) as exc:
        raise UploadError(400, f"Cannot write {relpath!r} in the workspace: {exc}") from exc


def _owner_of(workspace: Path) -> tuple[int, int] | None:
    """Who new files and folders should belong to: the workspace folder's owner, when the
    server runs as root and the folder was handed to another user (the docker runtime gives
    it to the sandbox user, who must be able to change what the person uploaded)."""
    if os.geteuid() != 0:
        return None
    st = os.stat(workspace)
    return None if st.st_uid == 0 else (st.st_uid, st.st_gid)


def _is_dir(loc: confined.Located) -> bool:
    st = loc.lstat()
    return st is not None and stat.S_ISDIR(st.st_mode)
