"""The local runtime's sandbox, decided once when a process starts (``LOCAL_SANDBOX``).

:func:`local_runtime_for_process` is the one start-up check, called by every `planact serve`,
`worker` and `run` (``RunManager.for_process``). ``RUNTIME`` must name a registered runtime;
then:

- ``LOCAL_SANDBOX=auto`` (default): bubblewrap when a trivial sandboxed command actually
  runs; otherwise a warning, once, saying why and how to install it;
- ``LOCAL_SANDBOX=bwrap``: :class:`SandboxConfigError` (the process refuses to start) when
  it does not work;
- ``LOCAL_SANDBOX=off``: today's unsandboxed runtime, with a warning.

A server (or worker) with more than one user in ``AUTH_TOKENS`` refuses to start when its
default runtime is an unsandboxed local one, unless ``ALLOW_SHARED_LOCAL=1``; with
``RUNTIME=docker`` it starts, and the unsandboxed local runtime is not offered to runs.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
from collections.abc import Callable
from typing import TYPE_CHECKING

from backend.runtime.bwrap import INSTALL_HINT, Bubblewrap
from backend.runtime.limits import SandboxLimits
from backend.runtime.limits.cgroups import Cgroups
from backend.runtime.local import LocalRuntime
from backend.runtime.registry import RuntimeModuleError, for_settings

if TYPE_CHECKING:
    from backend.config import Settings

log = logging.getLogger(__name__)

Which = Callable[[str], str | None]


class SandboxConfigError(Exception):
    """The process must not start with these settings; the message says what to set."""


def local_sandbox(settings: Settings, *, which: Which = shutil.which) -> Bubblewrap | None:
    """The bubblewrap sandbox the local runtime uses, or None (unsandboxed), per
    ``LOCAL_SANDBOX``; logs the outcome. ``which`` finds executables (tests replace it)."""
    mode = settings.local_sandbox
    # a warning when the local runtime is the default; with RUNTIME=docker it is only offered
    level = logging.WARNING if settings.runtime == "local" else logging.INFO
    if mode == "off":
        log.log(
            level,
            "LOCAL_SANDBOX=off: commands of the local runtime run unsandboxed, as the "
            "server's user: they can read every workspace, the database and the server's "
            "environment (docs/security.md)",
        )
        return None
    path = which("bwrap")
    if path is None:
        problem = "bubblewrap (bwrap) is not installed"
    else:
        limits = SandboxLimits.from_settings(settings)
        sandbox = Bubblewrap(
            path, network=settings.sandbox_network == "bridge", tmp_size=limits.tmp
        )
        failure = sandbox.probe()
        if failure is not None and "--size" in failure:
            log.warning(
                "this bubblewrap has no --size (0.7 or older): the sandbox's /tmp is not "
                "capped by SANDBOX_TMP_MB (only by the memory cap, where control groups work)"
            )
            sandbox = dataclasses.replace(sandbox, tmp_size=None)
            failure = sandbox.probe()
        if failure is None:
            log.info(
                "local runtime: commands run under bubblewrap (%s, network %s)",
                path,
                "on" if sandbox.network else "off",
            )
            return sandbox
        problem = f"bubblewrap ({path}) does not work here: {failure}"
    if mode == "bwrap":
        raise SandboxConfigError(
            f"LOCAL_SANDBOX=bwrap but {problem}. Install it ({INSTALL_HINT}), allow "
            "unprivileged user namespaces, or use RUNTIME=docker."
        )
    log.log(
        level,
        "%s: commands of the local runtime run unsandboxed, as the server's user. Install "
        "it with `%s` (or use RUNTIME=docker).",
        problem,
        INSTALL_HINT,
    )
    return None


def shared(settings: Settings) -> bool:
    """More than one user in AUTH_TOKEN/AUTH_TOKENS."""
    return len(set(settings.user_tokens().values())) > 1


def check_shared_local(settings: Settings, sandbox: Bubblewrap | None) -> bool:
    """Whether the local runtime may be offered to runs; raises SandboxConfigError when the
    default runtime is an unsandboxed local one shared by several users."""
    if sandbox is not None or settings.allow_shared_local or not shared(settings):
        return True
    if settings.runtime == "local":
        raise SandboxConfigError(
            "several users in AUTH_TOKENS share the local runtime, which is not sandboxed "
            "here: each user's commands could read the others' files, the database and the "
            "server's tokens. Use RUNTIME=docker, or install bubblewrap "
            f"({INSTALL_HINT}) with LOCAL_SANDBOX=auto or bwrap; ALLOW_SHARED_LOCAL=1 "
            "starts anyway."
        )
    log.warning(
        "several users in AUTH_TOKENS and no sandbox for the local runtime: runs may use "
        "RUNTIME=docker only"
    )
    return False


def local_runtime_for_process(
    settings: Settings, *, serving: bool = True, which: Which = shutil.which
) -> LocalRuntime:
    """The local runtime of a process, its sandbox decided and the start-up checks done.
    ``serving``: a server or worker (several users' runs), not `planact run`."""
    try:
        names = for_settings(settings).names()
    except RuntimeModuleError as exc:
        raise SandboxConfigError(str(exc)) from None
    if settings.runtime not in names:
        raise SandboxConfigError(
            f"RUNTIME={settings.runtime!r} is not a runtime: one of {', '.join(names)}."
        )
    try:
        limits = SandboxLimits.from_settings(settings)
    except ValueError as exc:
        raise SandboxConfigError(str(exc)) from None
    sandbox = local_sandbox(settings, which=which)
    offered = check_shared_local(settings, sandbox) if serving else True
    return LocalRuntime(
        terminal_timeout=settings.terminal_timeout,
        workspace_max_mb=settings.workspace_max_mb,
        sandbox=sandbox,
        offered=offered,
        limits=limits,
        cgroups=sandbox_cgroups(limits) if sandbox is not None else None,
    )


def sandbox_cgroups(limits: SandboxLimits) -> Cgroups | None:
    """The bubblewrap sandbox's control groups, or None (rlimits then); logs which."""
    found = Cgroups.detect(limits)
    if isinstance(found, Cgroups):
        log.info(
            "local runtime: each conversation's sandbox capped by control groups (memory "
            "%s, %d processes, %g CPUs)",
            limits.memory_words,
            limits.pids,
            limits.cpus,
        )
        return found
    log.warning(
        "local runtime: no control groups for the sandbox (%s): memory is capped per "
        "process (RLIMIT_DATA), CPU only yields (nice), processes are not capped; "
        "RUNTIME=docker caps all three per conversation (docs/security.md)",
        found,
    )
    return None
