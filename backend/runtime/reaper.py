"""Run one command so that no process it starts outlives it (the local runtime's wrapper).

    python -I -S reaper.py SERVER_PID COMMAND [LIMIT...] [WRAPPER ARGV...]

With a wrapper (the local runtime's bubblewrap: ``bwrap OPTIONS --``) it runs
``WRAPPER… bash -c COMMAND`` instead; the wrapper is its child like the shell would be.
Each LIMIT (:mod:`backend.runtime.limits`) applies to the wrapper, and so to the command:
``--wait-for-group`` (the server puts the wrapper in its control groups: see :func:`enter`),
``--rlimit NAME=VALUE`` (``RLIMIT_FSIZE=bytes``), ``--nice N``; a limit that cannot be
applied fails the command (exit 126), never runs it without. The wrapper closes every
file descriptor but 0-2 first (the server's event loop may hand it some), so nothing of
the server's reaches the command.

Standalone (standard library only, run with ``-I -S``). It makes itself a *child
subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``): every process the command starts stays its
descendant, even after ``setsid`` or a double fork, because orphans are re-parented to it
instead of to init. It runs ``bash -c COMMAND`` in a new session and, when that ends or when
it is told to stop (SIGTERM, SIGINT, SIGHUP, or the server dying: ``PR_SET_PDEATHSIG``),
kills every descendant and reaps them until it has no child left. Then it exits with the
command's status (128 + signal number for a signal, as shells do).

Limit without a sandbox: the command runs as the same user, so it can kill this wrapper
itself (``kill -9 $PPID``); what it started then escapes. Under bubblewrap it cannot see
this wrapper (its own PID namespace), and the namespace dies with bwrap.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import signal
import sys

TYPE_CHECKING = False  # the typing module is not imported: start-up time
if TYPE_CHECKING:
    from typing import Any

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
STOPPED = 128 + signal.SIGTERM
MAX_FD = 1 << 20  # close_range() closes the rest whatever the limit


class Stop(Exception):
    pass


_stopping = False


def _stop(signum: int, frame: object) -> None:
    """The first stop signal interrupts the wait for the command; later ones are ignored
    (a second Stop raised while the first is handled would skip the clean-up)."""
    global _stopping
    if _stopping:
        return
    _stopping = True
    raise Stop


def descendants(me: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        ppid = int(data[data.rindex(b")") + 2 :].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    found: list[int] = []
    todo = list(children.get(me, []))
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def kill_all() -> None:
    """Kill every descendant; return once none is left (no child to wait for)."""
    me = os.getpid()
    while True:
        for pid in descendants(me):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        try:
            os.waitpid(-1, 0)  # one exits (orphans of the killed come to us next)
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            return


SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def parse_limits(args: list[str]) -> tuple[dict[str, Any], list[str]]:
    """The leading LIMIT options of ``args``, and the wrapper argv after them."""
    limits: dict[str, Any] = {"rlimits": {}}
    while args[:1] == ["--wait-for-group"]:
        limits["wait"], args = True, args[1:]
    while len(args) >= 2 and args[0] in ("--rlimit", "--nice"):
        option, value, args = args[0], args[1], args[2:]
        if option == "--rlimit":
            name, _, number = value.partition("=")
            limits["rlimits"][name] = int(number)
        else:
            limits["nice"] = int(value)
    return limits, args


def enter(limits: dict[str, Any]) -> None:
    """Put this wrapper in the limits; the command inherits them (``posix_spawn``: no copy
    of this process). With ``--wait-for-group`` the server puts the wrapper in the
    conversation's control groups while it starts, then writes one byte on its stdin: "1"
    go on, anything else (or the end) fail. In a group the wrapper counts as one of its
    processes (it is small: the memory cap's OOM kill picks the largest first)."""
    if limits.get("wait"):
        go = os.read(0, 1)
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)  # the command's stdin, as without the wait
        os.close(null)
        if go != b"1":
            raise OSError("the server could not put it in its control groups")
    for name, value in limits["rlimits"].items():
        resource.setrlimit(getattr(resource, name), (value, value))
    if limits.get("nice"):
        os.nice(limits["nice"])


def run(server: int, command: str, wrapper: list[str] | None = None) -> int | None:
    """Run the command (under ``wrapper``, an argv prefix); its wait status, or None when
    told to stop first."""
    libc = ctypes.CDLL(None, use_errno=True)
    try:
        for sig in SIGNALS:
            signal.signal(sig, _stop)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != server:  # the server died before the line above
            return None
        argv = [*(wrapper or []), "bash", "-c", command]
        main_pid = os.posix_spawn(
            argv[0] if wrapper else "/bin/bash",
            argv,
            os.environ,
            setsid=True,
            setsigdef=(signal.SIGPIPE, signal.SIGXFSZ, *SIGNALS),
        )
        while True:
            pid, status = os.waitpid(-1, 0)
            if pid == main_pid:
                return status
    except Stop:
        return None


def main() -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    os.closerange(3, MAX_FD)
    limits, wrapper = parse_limits(sys.argv[3:])
    try:
        enter(limits)
    except (OSError, ValueError, AttributeError) as exc:
        sys.stderr.write(f"planact: the command could not start in its limits: {exc}\n")
        return 126
    status: int | None = None
    try:
        status = run(int(sys.argv[1]), sys.argv[2], wrapper)
    except Stop:  # after run() caught none: between its return and here
        status = None
    while True:  # no Stop may interrupt the clean-up: block the signals first
        try:
            signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
            break
        except Stop:
            continue
    kill_all()
    if status is None:
        return STOPPED
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main())
