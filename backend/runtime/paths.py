"""Workspace confinement: every path an action names must stay inside the workspace.

For reading or writing, use :mod:`backend.runtime.confined` (descriptors, no symlink race).
:func:`resolve_in_workspace` only *names* a path: the file it returns may be swapped for a
symlink before anyone opens it, so never open its result by path.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

SANDBOX_ROOT = PurePosixPath("/workspace")


class PathEscapeError(ValueError):
    """A path that resolves outside the workspace."""


def resolve_in_workspace(root: Path, path: str) -> Path:
    """Map an action's path to a real path inside ``root``, following symlinks.

    Relative paths are relative to the workspace; ``/workspace/...`` names the workspace in
    both runtimes; any other absolute path is accepted only when it lies inside ``root``.
    Raises :class:`PathEscapeError` for anything that resolves outside.
    """
    if "\x00" in path:
        raise PathEscapeError(f"path {path!r} contains a NUL byte")
    root_real = Path(os.path.realpath(root))
    raw = path.strip() or "."
    candidate: Path
    posix = PurePosixPath(raw)
    if posix.is_absolute():
        if posix == SANDBOX_ROOT or SANDBOX_ROOT in posix.parents:
            candidate = root_real.joinpath(*posix.relative_to(SANDBOX_ROOT).parts)
        else:
            candidate = Path(raw)
    else:
        candidate = root_real / raw
    real = Path(os.path.realpath(candidate))
    if real != root_real and root_real not in real.parents:
        raise PathEscapeError(f"path {path!r} is outside the workspace")
    return real


def relative_name(root: Path, real: Path) -> str:
    """The workspace-relative POSIX name of a confined path."""
    rel = real.relative_to(Path(os.path.realpath(root)))
    return rel.as_posix() if rel.parts else "."
