"""The conversation workspace on the host: where it is, what it holds."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import quote

import anyio

from backend.runtime import confined

SKIP_DIRS = frozenset({".git", "node_modules", "__pycache__", ".venv", "venv", ".cache"})
MAX_FILES = 5000


def workspace_path(root: Path, user_id: str, conversation_id: str) -> Path:
    return root / f"user_{user_id}" / f"Conversation_{conversation_id}"


def scan(workspace: Path) -> dict[str, tuple[int, int]]:
    """relative path -> (size, mtime_ns) of regular files, never following a symlink.

    Descriptor-based (a folder swapped for a symlink mid-walk is not entered); names that
    are not valid UTF-8 are left out (no URL or JSON string could name them).
    """
    return confined.scan(workspace, SKIP_DIRS, MAX_FILES)


async def scan_off_loop(workspace: Path) -> dict[str, tuple[int, int]]:
    """:func:`scan` on a worker thread (a big workspace takes a while), or at once when the
    folder is missing or empty (one ``scandir`` on the loop: a new conversation's run
    does not pay for a thread hop)."""
    try:
        with os.scandir(workspace) as entries:
            if next(entries, None) is None:
                return {}
    except (FileNotFoundError, NotADirectoryError):
        return {}
    except OSError:
        pass  # e.g. not readable: scan says what it can
    return await anyio.to_thread.run_sync(scan, workspace)


def file_url(conversation_id: str, filepath: str) -> str:
    """The download URL of a workspace file; every character of the name is kept
    (a newline is ``%0A``; the route accepts it)."""
    return f"/api/files/{conversation_id}/{quote(filepath)}"


def file_entry(conversation_id: str, filepath: str, size: int) -> dict[str, object]:
    return {
        "filepath": filepath,
        "filename": filepath.rsplit("/", 1)[-1],
        "url": file_url(conversation_id, filepath),
        "filesize": size,
    }
