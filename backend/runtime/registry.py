"""Which runtimes exist: name -> class, the one list everything else reads.

The settings (``RUNTIME``), the API (``"runtime"`` in a run body, ``runtimes`` in
``GET /api/settings``), the CLI (``--runtime``), the server's availability probe and the web
client (through the API) all ask here. A runtime is a :class:`~backend.runtime.base.BaseRuntime`
subclass in a module of its own; the built-in ones are named below by import path, so that a
process that never uses one never imports it (the docker SDK takes a while). What a class
tells the rest of planact:

- ``name``: what ``RUNTIME``, ``--runtime`` and ``"runtime"`` say;
- ``from_settings(settings, owner=...)``: how the server makes one;
- ``always_available`` / ``available()``: offered at once, or only once the server's probe at
  start-up (``start()``, then ``available()``) succeeded; ``unavailable_note`` says why not;
- ``prompt_note``: how the prompts tell the model where its commands run.

A runtime defined elsewhere (a plug-in, a test) joins with :func:`register`.
"""

from __future__ import annotations

import importlib
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from backend.config import Settings
    from backend.runtime.base import BaseRuntime, Runtime

# name -> "module:Class", loaded on first use (registration order is the offered order)
BUILTIN: dict[str, str] = {
    "local": "backend.runtime.local:LocalRuntime",
    "docker": "backend.runtime.docker:DockerRuntime",
}

_lock = threading.Lock()
_paths: dict[str, str] = dict(BUILTIN)
_loaded: dict[str, type[BaseRuntime]] = {}
_added: set[str] = set()  # registered at run time (removable)


class UnknownRuntime(ValueError):
    """No runtime of that name is registered."""


def names() -> list[str]:
    """Every registered runtime, in registration order."""
    with _lock:
        return list(_paths)


def get(name: str) -> type[BaseRuntime]:
    """The class of runtime ``name`` (imported on first use)."""
    with _lock:
        if name in _loaded:
            return _loaded[name]
        path = _paths.get(name)
    if path is None:
        raise UnknownRuntime(f"unknown runtime {name!r}: one of {', '.join(names())}")
    module, _, attr = path.partition(":")
    cls: type[BaseRuntime] = getattr(importlib.import_module(module), attr)
    if cls.name != name:
        raise UnknownRuntime(f"{path} is named {cls.name!r}, registered as {name!r}")
    with _lock:
        return _loaded.setdefault(name, cls)


def register(cls: type[BaseRuntime]) -> type[BaseRuntime]:
    """Add the runtime class ``cls`` under ``cls.name`` (usable as a class decorator).

    Registering the same class again is harmless; another class under a taken name is an
    error."""
    with _lock:
        if cls.name in _paths:
            if _loaded.get(cls.name) is cls:
                return cls
            raise ValueError(f"a runtime named {cls.name!r} is already registered")
        _paths[cls.name] = f"{cls.__module__}:{cls.__qualname__}"
        _loaded[cls.name] = cls
        _added.add(cls.name)
    return cls


def unregister(name: str) -> None:
    """Remove a runtime added with :func:`register` (the built-in ones stay)."""
    with _lock:
        if name in _added:
            _added.discard(name)
            del _paths[name], _loaded[name]


def make(settings: Settings, name: str | None = None, *, owner: str | None = None) -> Runtime:
    """A new runtime ``name`` (default ``RUNTIME``) for this process (``owner``: its
    instance id, which labels what the runtime leaves outside the process)."""
    return get(name or settings.runtime).from_settings(settings, owner=owner)


def check_name(value: str) -> str:
    """``value`` if a runtime of that name is registered (for validating settings)."""
    if value not in names():
        raise ValueError(f"must be one of {', '.join(names())}, not {value!r}")
    return value
