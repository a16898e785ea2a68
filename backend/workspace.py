"""The conversation workspace on the host: where it is, what it holds."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import quote

SKIP_DIRS = {".git", "node_modules", "__pycache__", ".venv", "venv", ".cache"}
MAX_FILES = 5000


def workspace_path(root: Path, user_id: str, conversation_id: str) -> Path:
    return root / f"user_{user_id}" / f"Conversation_{conversation_id}"


def scan(workspace: Path) -> dict[str, tuple[int, int]]:
    """relative path -> (size, mtime_ns) of regular files, not following symlinks."""
    out: dict[str, tuple[int, int]] = {}
    if not workspace.is_dir():
        return out
    for dirpath, dirnames, filenames in os.walk(workspace):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        for name in sorted(filenames):
            full = Path(dirpath) / name
            try:
                st = full.lstat()
            except OSError:
                continue
            if not full.is_symlink() and full.is_file():
                out[full.relative_to(workspace).as_posix()] = (st.st_size, st.st_mtime_ns)
            if len(out) >= MAX_FILES:
                return out
    return out


def file_url(conversation_id: str, filepath: str) -> str:
    return f"/api/files/{conversation_id}/{quote(filepath)}"


def file_entry(conversation_id: str, filepath: str, size: int) -> dict[str, object]:
    return {
        "filepath": filepath,
        "filename": filepath.rsplit("/", 1)[-1],
        "url": file_url(conversation_id, filepath),
        "filesize": size,
    }
