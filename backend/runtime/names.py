"""The names of the runtimes that exist, in the order they are offered (no imports: the
settings validate ``RUNTIME`` against it). Loading a runtime's class by its name is
:mod:`backend.runtime.registry`'s work."""

from __future__ import annotations

import threading

# name -> "module:Class", loaded on first use (registration order is the offered order)
BUILTIN: dict[str, str] = {
    "local": "backend.runtime.local:LocalRuntime",
    "docker": "backend.runtime.docker:DockerRuntime",
}

lock = threading.RLock()
paths: dict[str, str] = dict(BUILTIN)
added: set[str] = set()  # registered at run time (removable)


def names() -> list[str]:
    """Every registered runtime, in registration order."""
    with lock:
        return list(paths)


def check_name(value: str) -> str:
    """``value`` if a runtime of that name is registered (for validating settings)."""
    if value not in names():
        raise ValueError(f"must be one of {', '.join(names())}, not {value!r}")
    return value
