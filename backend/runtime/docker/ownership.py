"""Whose files: the uid/gid a sandbox runs as, and where its workspace is on the host."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

from backend.runtime.base import RuntimeUnavailable

if TYPE_CHECKING:
    from backend.config import Settings

DEFAULT_UID = 1000  # who a root-owned workspace is handed to: the sandbox is never root


def claim_workspace(settings: Settings, key: str) -> tuple[int, int]:
    """The uid/gid commands in the workspace ``key`` run as: its owner's, never root's.

    SANDBOX_UID / SANDBOX_GID override. A root-owned workspace (the server runs as root,
    e.g. in a container) is handed to uid 1000 so that the sandbox user can write to it.
    """
    st = os.stat(key)
    uid_set, gid_set = settings.sandbox_uid, settings.sandbox_gid
    uid = uid_set if uid_set is not None else (st.st_uid or DEFAULT_UID)
    if gid_set is not None:
        gid = gid_set
    elif uid_set is None and st.st_uid:
        gid = st.st_gid
    else:
        gid = uid
    if uid == 0:
        raise RuntimeUnavailable("SANDBOX_UID=0: the sandbox refuses to run commands as root")
    if st.st_uid == 0 and os.geteuid() == 0:
        hand_over(key, uid, gid)
    return uid, gid


def hand_over(root: str, uid: int, gid: int) -> None:
    """Give a root-owned workspace and its root-owned entries to uid:gid.

    Descriptor-based (os.fwalk, ``*at`` calls): no symlink is followed, even one swapped in.
    """
    os.chown(root, uid, gid, follow_symlinks=False)
    for _folder, dirs, files, dir_fd in os.fwalk(root, follow_symlinks=False):
        for name in dirs + files:
            with contextlib.suppress(OSError):
                if os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_uid == 0:
                    os.chown(name, uid, gid, dir_fd=dir_fd, follow_symlinks=False)


def host_path(settings: Settings, root: str, key: str) -> str:
    """Where the workspace ``key`` (under WORKSPACE_DIR, real path ``root``) is for the
    engine: itself, or under SANDBOX_HOST_WORKSPACE_DIR when the app runs in a container."""
    host_dir = settings.sandbox_host_workspace_dir
    if host_dir is None:
        return key
    try:
        rel = Path(key).relative_to(root)
    except ValueError:
        raise RuntimeUnavailable(
            f"workspace {key} is outside WORKSPACE_DIR ({root}), so it cannot be "
            "mapped onto SANDBOX_HOST_WORKSPACE_DIR"
        ) from None
    return str(Path(host_dir) / rel)
