"""Services: long-lived processes of a conversation's sandbox (a preview's app), started on
purpose and stopped by their owner (backend/previews), never by the end of an action.

Local runtime: the service runs under the same reaper and bubblewrap rules as a command
(:mod:`backend.runtime.reaper`: no process survives its stop or the server's death; the
sandbox's own network namespace, the same limits), with one more bind: ``socket_dir``, a
folder the server made, at :data:`SOCKET_DIR_INSIDE`. Beside the service runs the
forwarder (:mod:`backend.runtime.forwarder`) with the sandbox's python3: it listens on Unix
sockets in that folder and answers each connection with a socket connected to
``127.0.0.1:<port>`` inside the sandbox's namespace (:mod:`backend.previews.handoff`).
Nothing of the host's network is opened to the sandbox.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from backend.runtime import forwarder

SOCKET_DIR_INSIDE = "/.preview"
FORWARDER_SOURCE = Path(forwarder.__file__).read_text(encoding="utf-8")


def service_script(command: str, port: int, socket_dir: str, python: str = "python3") -> str:
    """The shell text a service runs: the forwarder in the background, then the command
    (the service ends when the command ends; its reaper then stops the forwarder). The
    command runs in a subshell of its own, so that a ``wait`` in it waits for its own
    children only, never for the forwarder (which ends only after the shell)."""
    fwd = f"{shlex.quote(python)} -I -S -c {shlex.quote(FORWARDER_SOURCE)}"
    return f"{fwd} {shlex.quote(socket_dir)} {int(port)} &\n(\n{command}\n)"
