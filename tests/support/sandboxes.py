"""Removing the docker sandboxes a test's servers made (a sandbox outlives its server by
design: a killed server's are reaped by another server once the dead one's lease is long
gone, which a test's short-lived servers may not live to see)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from backend.runtime.docker import LABEL_WORKSPACE, MIN_API_VERSION


def mine(label: str, tmp: Path) -> bool:
    """Whether a sandbox's workspace label lies under the test's folder ``tmp`` (as given or
    as the engine sees it; never a sibling folder that merely shares its name's start)."""
    roots = {str(tmp), os.path.realpath(tmp)}
    return any(label == root or label.startswith(root + os.sep) for root in roots)


def remove_sandboxes_under(tmp: Path) -> int:
    """Remove the sandboxes whose workspace is under ``tmp``, and only those; one that
    vanishes meanwhile (its server or a reaper removed it) is not an error. How many were
    removed."""
    import docker

    client = docker.from_env(version=MIN_API_VERSION)
    removed = 0
    try:
        # ignore_removed: one removed between docker-py's list and its inspect is skipped
        listed = client.containers.list(
            all=True, filters={"label": LABEL_WORKSPACE}, ignore_removed=True
        )
        for container in listed:
            if not mine(container.labels.get(LABEL_WORKSPACE, ""), tmp):
                continue
            with contextlib.suppress(docker.errors.NotFound):
                container.remove(force=True)
                removed += 1
    finally:
        client.close()
    return removed
