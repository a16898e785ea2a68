"""No file descriptor of the server's reaches a process it starts, but 0-2.

Python's ``subprocess`` closes the others (``close_fds``), but the server's event loop
(uvloop, as uvicorn runs it) spawns without closing them: a pipe the server inherited from
its parent, and the loop's own, would stay open in every child. The local runtime's reaper
closes them itself (:mod:`backend.runtime.reaper`); a child started by a library (an MCP
stdio server) goes through :func:`without_inherited_descriptors`: a Python one-liner that
closes them and executes the command in its place (same process, ~20 ms once per start).
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping

CLOSE_AND_EXEC = "import os,sys;os.closerange(3,1<<20);os.execvp(sys.argv[1],sys.argv[1:])"


def without_inherited_descriptors(
    command: str, args: list[str], env: Mapping[str, str] | None = None
) -> tuple[str, list[str]]:
    """``(command, args)`` that run ``command args`` with fds 0-2 only. A command that is
    not found is left as it is (its start then fails naming it, as before)."""
    path = (env or os.environ).get("PATH")
    if shutil.which(command, path=path) is None:
        return command, args
    return sys.executable, ["-I", "-S", "-c", CLOSE_AND_EXEC, command, *args]
