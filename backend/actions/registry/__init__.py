"""The action registry (DESIGN "One place per concept"): one module per action.

The builtin actions live in :mod:`backend.actions.registry.builtin`, one module each with an
``ACTION``; they are registered here, once. A test or a plug-in adds one with
:func:`register`."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path
from typing import TYPE_CHECKING

from backend.actions.registry import builtin
from backend.actions.registry.core import (
    ActionContext,
    ActionDef,
    Done,
    Handler,
    Offer,
    brief,
    by_kind,
    defs,
    execute,
    get,
    kind_of,
    kinds,
    lemonai_type,
    offered,
    on_change,
    payload_of,
    register,
    show,
    unregister,
)
from backend.messages.payloads import plain_items

if TYPE_CHECKING:
    from backend.actions.model import Action
    from backend.runtime.base import ActionResult, OutputCallback, Runtime

__all__ = [
    "ActionContext",
    "ActionDef",
    "Done",
    "Handler",
    "Offer",
    "brief",
    "by_kind",
    "defs",
    "execute",
    "get",
    "kind_of",
    "kinds",
    "lemonai_type",
    "load_builtin",
    "offered",
    "on_change",
    "payload_of",
    "register",
    "run_action",
    "show",
    "unregister",
]


def load_builtin() -> None:
    """Register every ``ACTION`` of the modules in :mod:`builtin` (a module added there is
    all a new action needs; loading again replaces what was registered)."""
    found: list[ActionDef] = []
    for info in pkgutil.iter_modules(builtin.__path__):
        module = importlib.import_module(f"{builtin.__name__}.{info.name}")
        defn = getattr(module, "ACTION", None)
        if isinstance(defn, ActionDef):
            found.append(defn)
    for defn in sorted(found, key=lambda d: (d.order, d.name)):  # the prompt's order
        register(defn)


load_builtin()


async def run_action(
    runtime: Runtime, action: Action, workspace: Path, on_output: OutputCallback | None = None
) -> ActionResult:
    """Run one action in ``runtime`` through its handler (the task loop calls handlers with
    its own context; this is for callers that hold an Action: tests, benches)."""
    from backend.runtime.base import ActionResult

    done = await execute(ActionContext(runtime, workspace, on_output=on_output), action)
    return ActionResult(done.status, done.content, done.filepath, data=plain_items(done.data))
