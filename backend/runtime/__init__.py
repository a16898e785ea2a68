"""Where actions run. Which runtimes exist: :mod:`backend.runtime.registry`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from backend.runtime import registry
from backend.runtime.base import ActionResult, BaseRuntime, PromptNote, Runtime

if TYPE_CHECKING:
    from backend.config import Settings

__all__ = ["ActionResult", "BaseRuntime", "PromptNote", "Runtime", "make_runtime"]


def make_runtime(
    settings: Settings, name: str | None = None, *, owner: str | None = None
) -> Runtime:
    """The runtime ``name`` (default ``RUNTIME``). ``owner``: this process's instance id
    (the docker runtime labels its sandboxes with it; see DockerRuntime)."""
    return registry.get(name or settings.runtime).from_settings(settings, owner=owner)
