"""Which runtimes exist: a :class:`Runtimes` registry, name -> class, the one list everything
else reads.

The settings (``RUNTIME``, ``RUNTIMES``), the API (``"runtime"`` in a run body, ``runtimes``
in ``GET /api/settings``), the CLI (``--runtime``), the server's availability probe and the
web client (through the API) all ask the registry of the process's settings
(:func:`for_settings`). A runtime is a :class:`~backend.runtime.base.BaseRuntime` subclass in
a module of its own; the built-in ones are its line in :data:`BUILTIN`, by import path, so
that a process that never uses one never imports it (the docker SDK takes a while). What a
class tells the rest of planact:

- ``name``: what ``RUNTIME``, ``--runtime`` and ``"runtime"`` say;
- ``from_settings(settings, owner=...)``: how the server makes one;
- ``always_available`` / ``available()``: offered at once, or only once the server's probe at
  start-up (``start()``, then ``available()``) succeeded; ``unavailable_note`` says why not;
- ``prompt_note``: how the prompts tell the model where its commands run.

A registry never changes once made. A deployment (or a test) adds runtimes defined elsewhere
with ``RUNTIME_MODULES`` (``module:Class``, comma-separated), which makes the registry of its
settings (:func:`for_settings`), or :meth:`Runtimes.with_runtimes`, which makes another
registry: the builtin one keeps its runtimes.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Mapping
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from backend.config import Settings
    from backend.runtime.base import BaseRuntime

__all__ = [
    "BUILTIN",
    "RuntimeModuleError",
    "Runtimes",
    "UnknownRuntime",
    "builtin_runtimes",
    "for_settings",
    "from_environment",
]

# name -> "module:Class", loaded on first use; the order is the offered order
BUILTIN: dict[str, str] = {
    "local": "backend.runtime.local:LocalRuntime",
    "docker": "backend.runtime.docker:DockerRuntime",
}


class UnknownRuntime(ValueError):
    """No runtime of that name is in the registry."""


class RuntimeModuleError(ValueError):
    """A ``RUNTIME_MODULES`` entry that cannot be read (its message says which, and why)."""


class Runtimes:
    """The runtimes one process offers, in order: each a class, or the import path of one
    (imported on first use). It never changes: :meth:`with_runtimes` makes another."""

    def __init__(self, runtimes: Mapping[str, str | type[BaseRuntime]]) -> None:
        self._paths = {name: r for name, r in runtimes.items() if isinstance(r, str)}
        self._loaded = {name: r for name, r in runtimes.items() if not isinstance(r, str)}
        self._names = list(runtimes)
        self._lock = threading.Lock()

    def names(self) -> list[str]:
        return list(self._names)

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def get(self, name: str) -> type[BaseRuntime]:
        """The class of runtime ``name`` (imported on first use). Raises UnknownRuntime."""
        with self._lock:
            if name in self._loaded:
                return self._loaded[name]
        path = self._paths.get(name)
        if path is None:
            raise UnknownRuntime(f"unknown runtime {name!r}: one of {', '.join(self._names)}")
        cls = _imported(path)
        if cls.name != name:
            raise UnknownRuntime(f"{path} is named {cls.name!r}, registered as {name!r}")
        with self._lock:
            return self._loaded.setdefault(name, cls)

    def check_name(self, value: str) -> str:
        """``value`` if a runtime of that name is here (for validating settings)."""
        if value not in self._names:
            raise ValueError(f"must be one of {', '.join(self._names)}, not {value!r}")
        return value

    def with_runtimes(self, *added: type[BaseRuntime]) -> Runtimes:
        """Another registry: these runtime classes added after this one's, under their
        ``name``. A name this one has already is refused (ValueError)."""
        out: dict[str, str | type[BaseRuntime]] = {n: self._entry(n) for n in self._names}
        for cls in added:
            if cls.name in out:
                raise ValueError(f"a runtime named {cls.name!r} is already registered")
            out[cls.name] = cls
        return Runtimes(out)

    def _entry(self, name: str) -> str | type[BaseRuntime]:
        with self._lock:
            return self._loaded.get(name) or self._paths[name]


def _imported(path: str) -> type[BaseRuntime]:
    module, _, attr = path.partition(":")
    cls: type[BaseRuntime] = getattr(importlib.import_module(module), attr)
    return cls


@cache
def builtin_runtimes() -> Runtimes:
    """The runtimes of :data:`BUILTIN` (its line is all a new builtin runtime needs)."""
    return Runtimes(BUILTIN)


def for_settings(settings: Settings) -> Runtimes:
    """The registry a process offers: the builtin runtimes and ``RUNTIME_MODULES``'.
    Raises RuntimeModuleError for an entry that cannot be read."""
    return _with_modules(tuple(settings.runtime_module_paths))


@cache
def _with_modules(paths: tuple[str, ...]) -> Runtimes:
    from backend.runtime.base import BaseRuntime

    added: list[type[BaseRuntime]] = []
    for path in paths:
        module, colon, attr = path.partition(":")
        if not (module and colon and attr):
            raise RuntimeModuleError(f"RUNTIME_MODULES: {path!r} is not module:Class")
        try:
            cls = _imported(path)
        except (ImportError, AttributeError) as exc:
            why = f"RUNTIME_MODULES: {path!r} cannot be imported: {exc}"
            raise RuntimeModuleError(why) from exc
        if not (isinstance(cls, type) and issubclass(cls, BaseRuntime)):
            raise RuntimeModuleError(f"RUNTIME_MODULES: {path!r} is not a BaseRuntime subclass")
        added.append(cls)
    try:
        return builtin_runtimes().with_runtimes(*added)
    except ValueError as exc:
        raise RuntimeModuleError(f"RUNTIME_MODULES: {exc}") from None


def from_environment() -> Runtimes:
    """The registry of the settings this process reads (the environment and ./.env), for
    what is decided before they are read (the CLI's ``--runtime`` choices). Settings that
    cannot be read give the builtin runtimes: their own check says what is wrong."""
    from backend.config import Settings

    try:
        return for_settings(Settings())
    except ValueError:  # (pydantic's ValidationError, RuntimeModuleError)
        return builtin_runtimes()
