"""Where actions run."""

from __future__ import annotations

from typing import TYPE_CHECKING

from backend.runtime.base import ActionResult, BaseRuntime, Runtime

if TYPE_CHECKING:
    from backend.config import Settings

__all__ = ["ActionResult", "BaseRuntime", "Runtime", "make_runtime"]


def make_runtime(
    settings: Settings, name: str | None = None, *, owner: str | None = None
) -> Runtime:
    """The runtime ``name`` (default ``RUNTIME``). ``owner``: the docker runtime's instance id
    (labels its sandboxes; see DockerRuntime)."""
    kind = name or settings.runtime
    if kind == "docker":
        from backend.runtime.docker import DockerRuntime

        return DockerRuntime(settings, owner=owner)
    from backend.runtime.local import LocalRuntime

    return LocalRuntime(
        terminal_timeout=settings.terminal_timeout, workspace_max_mb=settings.workspace_max_mb
    )
