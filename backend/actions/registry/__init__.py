"""The action registry: one module per action, and the :class:`Registry` a process offers.

The builtin actions live in :mod:`backend.actions.registry.builtin`, one module each with an
``ACTION``; :func:`builtin_registry` is made from them, once. A deployment adds its own
(``ACTION_MODULES``, :func:`for_settings`); a test makes a registry of its own
(``builtin_registry().with_actions(MY_ACTION)``) and hands it to what it runs."""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from backend.actions.registry import builtin
from backend.actions.registry.core import (
    ActionContext,
    ActionDef,
    Done,
    Handler,
    Handling,
    Offer,
    Registry,
    Shown,
    brief,
)
from backend.messages.payloads import plain_items

if TYPE_CHECKING:
    from backend.actions.model import Action
    from backend.config import Settings
    from backend.runtime.base import ActionResult, OutputCallback, Runtime

__all__ = [
    "ActionContext",
    "ActionDef",
    "ActionModuleError",
    "Done",
    "Handler",
    "Handling",
    "Offer",
    "Registry",
    "Shown",
    "brief",
    "builtin_registry",
    "definitions",
    "for_settings",
    "load",
    "run_action",
]


def definitions(name: str) -> list[ActionDef]:
    """The ``ACTION`` of module ``name``, or of every module of package ``name``."""
    module = importlib.import_module(name)
    found: list[ActionDef] = []
    if hasattr(module, "__path__"):
        for info in pkgutil.iter_modules(module.__path__):
            found += definitions(f"{name}.{info.name}")
        return found
    defn = getattr(module, "ACTION", None)
    return [defn] if isinstance(defn, ActionDef) else []


class ActionModuleError(ValueError):
    """A module or package named to add actions that cannot be read (its message says
    which, and why)."""


def load(*names: str) -> Registry:
    """The registry of the builtin actions and those of the modules or packages ``names``
    (one of a builtin action's name replaces it). Raises ActionModuleError for a name that
    cannot be imported or holds no ``ACTION``."""
    base = builtin_registry()
    added: list[ActionDef] = []
    for name in names:
        try:
            found = definitions(name)
        except ImportError as exc:
            raise ActionModuleError(f"ACTION_MODULES: {name!r} cannot be imported: {exc}") from exc
        if not found:
            raise ActionModuleError(
                f"ACTION_MODULES: {name!r} defines no action (a module needs an ACTION, an "
                "ActionDef; a package, modules that have one)"
            )
        added += found
    return base.with_actions(*added) if added else base


@cache
def builtin_registry() -> Registry:
    """Every action of :mod:`builtin` (a module added there is all a new action needs)."""
    return Registry(definitions(builtin.__name__))


def for_settings(settings: Settings) -> Registry:
    """The registry a process offers: the builtin actions and ``ACTION_MODULES``'."""
    return _loaded(tuple(settings.action_module_names))


@cache
def _loaded(names: tuple[str, ...]) -> Registry:
    return load(*names)


async def run_action(
    runtime: Runtime,
    action: Action,
    workspace: Path,
    on_output: OutputCallback | None = None,
    registry: Registry | None = None,
) -> ActionResult:
    """Run one action in ``runtime`` through its handler (the task loop calls handlers with
    its own context; this is for callers that hold an Action: tests, benches)."""
    from backend.runtime.base import ActionResult

    actions = registry or builtin_registry()
    done = await actions.execute(ActionContext(runtime, workspace, on_output=on_output), action)
    return ActionResult(done.status, done.content, done.filepath, data=plain_items(done.data))
