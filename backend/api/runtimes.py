"""Which runtimes a run may pick on this server (``runtimes`` in GET /api/settings, the
``runtime`` of POST /api/agent/run), decided once at start-up (docs/api.md, docs/security.md).

The default runtime (``RUNTIME``) is always among them. Then:

- ``RUNTIMES`` (comma-separated) set: exactly those, as the operator said. It must name
  registered runtimes and include ``RUNTIME`` (else the server refuses to start).
- ``RUNTIMES`` unset: every registered runtime, except that an **unsandboxed** one is never
  offered beside a sandboxed default: with ``RUNTIME=docker`` the local runtime is offered only
  when bubblewrap sandboxes it. A runtime is unsandboxed when its instance has no sandbox
  (``sandbox is None``: the local runtime with ``LOCAL_SANDBOX=off`` or no working
  bubblewrap); the docker runtime always is sandboxed.

Either way the local runtime of a shared server without a sandbox stays out
(``ALLOW_SHARED_LOCAL``, backend/runtime/sandboxing.py), and a runtime that needs something
outside the server (an engine) is offered once the start-up probe found it working."""

from __future__ import annotations

from typing import TYPE_CHECKING

from backend.runtime.registry import for_settings
from backend.runtime.sandboxing import SandboxConfigError

if TYPE_CHECKING:
    from backend.config import Settings
    from backend.runs.manager import RunManager


def listed(settings: Settings) -> list[str]:
    """The names in ``RUNTIMES`` (empty: unset), checked: registered, RUNTIME among them."""
    names = [n.strip() for n in settings.runtimes.split(",") if n.strip()]
    if not names:
        return []
    known = for_settings(settings).names()
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SandboxConfigError(
            f"RUNTIMES names {', '.join(map(repr, unknown))}, not a runtime: each one of "
            f"{', '.join(known)}."
        )
    if settings.runtime not in names:
        raise SandboxConfigError(
            f"RUNTIMES={settings.runtimes!r} leaves out RUNTIME={settings.runtime!r}, the "
            "runtime a run gets when it names none: add it to RUNTIMES."
        )
    return names


def allowed(settings: Settings, manager: RunManager) -> list[str]:
    """Every runtime a run may pick here, in registry order (availability aside)."""
    chosen = listed(settings)
    local = manager.runtime("local")
    local_offered = getattr(local, "offered", True)  # False: shared, no sandbox
    local_sandboxed = getattr(local, "sandbox", True) is not None
    default_sandboxed = settings.runtime != "local" or local_sandboxed
    out: list[str] = []
    for name in for_settings(settings).names():
        if name == "local" and not local_offered:
            continue
        if chosen:
            keep = name in chosen
        else:
            unsandboxed = name == "local" and not local_sandboxed
            keep = name == settings.runtime or not (default_sandboxed and unsandboxed)
        if keep:
            out.append(name)
    return out


def offered_at_start(settings: Settings, allowed_names: list[str]) -> list[str]:
    """Those offered at once: the default and those that need nothing outside the server;
    the others join when the start-up probe found them working."""
    return [
        name
        for name in allowed_names
        if name == settings.runtime or for_settings(settings).get(name).always_available
    ]


def refusal(settings: Settings, manager: RunManager, name: str, allowed_names: list[str]) -> str:
    """Why a run may not pick runtime ``name`` here (a 400's message)."""
    head = f"The {name} runtime is not available on this server"
    offered = ", ".join(allowed_names)
    if name in allowed_names:  # allowed, but the probe did not find it working
        note = for_settings(settings).get(name).unavailable_note
        return head + (f" ({note})." if note else ".")
    if name == "local" and not getattr(manager.runtime("local"), "offered", True):
        return (
            f"{head}: several users share it and the local runtime has no sandbox "
            f"(docs/security.md). Offered: {offered}."
        )
    if listed(settings):
        return f"{head}: RUNTIMES lists only {offered}."
    return (
        f"{head}: its commands would run unsandboxed, and the default runtime "
        f"({settings.runtime}) is sandboxed. Offered: {offered}. The operator can offer it "
        f"with RUNTIMES={settings.runtime},{name} (docs/security.md)."
    )
