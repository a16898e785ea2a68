"""Reaching a forwarder's Unix socket safely when its folder is one the sandbox can write
(docker: under the workspace): every component below the trusted folder is opened without
following a symlink, the socket itself as an ``O_PATH`` descriptor that must be a socket,
and connections go to ``/proc/self/fd/<fd>`` (also short enough for any path length). A
sandbox that swaps in a symlink or another file gets a refused connection, never the host's
socket."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def open_socket(path: str, trusted: str | None = None) -> int:
    """An ``O_PATH`` descriptor of the socket at ``path``. Below ``trusted`` (a folder of
    the server's), no component may be a symlink. OSError when it is not a socket."""
    if trusted and path.startswith(trusted.rstrip("/") + "/"):
        base, rest = trusted, path[len(trusted.rstrip("/")) + 1 :]
    else:
        base, rest = os.path.dirname(path), os.path.basename(path)
    parts = [p for p in rest.split("/") if p]
    if not parts or any(p in (".", "..") for p in parts):
        raise OSError(errno.EINVAL, "not a socket path", path)
    fd = os.open(base, DIR_FLAGS)
    try:
        for part in parts[:-1]:
            nxt = os.open(part, DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = nxt
        sock = os.open(parts[-1], os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
    finally:
        os.close(fd)
    if not stat.S_ISSOCK(os.fstat(sock).st_mode):
        os.close(sock)
        raise OSError(errno.ENOTSOCK, "not a socket", path)
    return sock


def fd_path(fd: int) -> str:
    return f"/proc/self/fd/{fd}"


def make_dir_beneath(root: Path, name: str, mode: int) -> int:
    """Create (if needed) ``root/name`` without following a symlink; its descriptor."""
    fd = os.open(root, DIR_FLAGS)
    try:
        with contextlib.suppress(FileExistsError):
            os.mkdir(name, 0o700, dir_fd=fd)
        sub = os.open(name, DIR_FLAGS, dir_fd=fd)
    finally:
        os.close(fd)
    os.fchmod(sub, mode)
    return sub


def socket_dir_beneath(workspace: Path) -> Path:
    """A fresh folder ``workspace/.preview/<random>`` that any uid may write (a docker
    service's own uid), made without following a symlink the sandbox put there."""
    import secrets

    base = make_dir_beneath(workspace, ".preview", 0o755)
    try:
        name = secrets.token_hex(6)
        os.mkdir(name, 0o700, dir_fd=base)
        sub = os.open(name, DIR_FLAGS, dir_fd=base)
        os.fchmod(sub, 0o777)
        os.close(sub)
    finally:
        os.close(base)
    return workspace / ".preview" / name


def remove_dir(path: Path, trusted: str | None) -> None:
    """Remove a service's socket folder (below ``trusted`` without following symlinks)."""
    import shutil

    if not trusted:
        shutil.rmtree(path, ignore_errors=True)
        return
    try:
        parent = os.open(trusted, DIR_FLAGS)
    except OSError:
        return
    try:
        rel = [p for p in str(path)[len(trusted.rstrip("/")) + 1 :].split("/") if p]
        fd = parent
        for part in rel[:-1]:
            nxt = os.open(part, DIR_FLAGS, dir_fd=fd)
            if fd != parent:
                os.close(fd)
            fd = nxt
        with contextlib.suppress(OSError):
            shutil.rmtree(rel[-1], dir_fd=fd)
        if fd != parent:
            os.close(fd)
    except OSError:
        pass
    finally:
        os.close(parent)
