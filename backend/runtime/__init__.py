"""Where actions run. Which runtimes exist: :mod:`backend.runtime.registry`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from backend.runtime.base import ActionResult, BaseRuntime, PromptNote, Runtime
from backend.runtime.registry import for_settings

if TYPE_CHECKING:
    from backend.config import Settings

__all__ = ["ActionResult", "BaseRuntime", "PromptNote", "Runtime", "make_runtime"]


def make_runtime(
    settings: Settings, name: str | None = None, *, owner: str | None = None
) -> Runtime:
    """The runtime ``name`` (default ``RUNTIME``) of the settings' registry. ``owner``: this
    process's instance id (the docker runtime labels its sandboxes with it; see DockerRuntime)."""
    cls = for_settings(settings).get(name or settings.runtime)
    return cls.from_settings(settings, owner=owner)
