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
from typing import TYPE_CHECKING

from backend.runtime.names import BUILTIN, added, check_name, lock, names, paths

if TYPE_CHECKING:
    from backend.runtime.base import BaseRuntime

__all__ = ["BUILTIN", "UnknownRuntime", "check_name", "get", "names", "register", "unregister"]

_loaded: dict[str, type[BaseRuntime]] = {}


class UnknownRuntime(ValueError):
    """No runtime of that name is registered."""


def get(name: str) -> type[BaseRuntime]:
    """The class of runtime ``name`` (imported on first use)."""
    with lock:
        if name in _loaded:
            return _loaded[name]
        path = paths.get(name)
    if path is None:
        raise UnknownRuntime(f"unknown runtime {name!r}: one of {', '.join(names())}")
    module, _, attr = path.partition(":")
    cls: type[BaseRuntime] = getattr(importlib.import_module(module), attr)
    if cls.name != name:
        raise UnknownRuntime(f"{path} is named {cls.name!r}, registered as {name!r}")
    with lock:
        return _loaded.setdefault(name, cls)


def register(cls: type[BaseRuntime]) -> type[BaseRuntime]:
    """Add the runtime class ``cls`` under ``cls.name`` (usable as a class decorator).

    Registering the same class again is harmless; another class under a taken name is an
    error."""
    with lock:
        if cls.name in paths:
            if _loaded.get(cls.name) is cls:
                return cls
            raise ValueError(f"a runtime named {cls.name!r} is already registered")
        paths[cls.name] = f"{cls.__module__}:{cls.__qualname__}"
        _loaded[cls.name] = cls
        added.add(cls.name)
    return cls


def unregister(name: str) -> None:
    """Remove a runtime added with :func:`register` (the built-in ones stay)."""
    with lock:
        if name in added:
            added.discard(name)
            del paths[name], _loaded[name]
