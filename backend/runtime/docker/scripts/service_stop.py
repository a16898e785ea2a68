"""Stop one preview service of a sandbox (backend/runtime/docker/services.py), as the sandbox
user:  python3 -c "$(cat service_stop.py)" TOKEN

The service is the exec whose environment holds ``PLANACT_SERVICE=TOKEN`` and whose parent
is outside the container (pid 0: a `docker exec`, which no command can make; its environment
is readable only by its own uid). Kills every process of its session and every descendant
of those (a child that called setsid is still its parent's), and the sandbox user's orphans
(adopted by the container's init, outside any live exec's session: what a double fork
escaped to, a running command's too, which its end would kill anyway), until none is left;
exit 1 if some survive four seconds. Standard library only, Python 3.6 syntax.
"""
# ruff: noqa: UP006, UP031, UP035

import contextlib
import os
import signal
import sys
import time
from typing import Dict, Set, Tuple


def table() -> Dict[int, Tuple[int, int]]:
    """pid -> (parent pid, session id) of every live (not zombie) process."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            found[int(entry)] = (int(fields[1]), int(fields[3]))
    return found


def marked(pid: int, marker: bytes) -> bool:
    try:
        with open("/proc/%d/environ" % pid, "rb") as fh:
            return marker in fh.read().split(b"\0")
    except OSError:
        return False


def orphans(procs: Dict[int, Tuple[int, int]]) -> Set[int]:
    """The sandbox user's processes adopted by init, outside the session of a live exec."""
    uid = os.getuid()
    execs = {pid for pid, (ppid, sid) in procs.items() if ppid == 0 and sid == pid}
    found = set()
    for pid, (ppid, sid) in procs.items():
        if ppid != 1 or sid in execs:
            continue
        try:
            if os.stat("/proc/%d" % pid).st_uid == uid:
                found.add(pid)
        except OSError:
            continue
    return found


def victims(procs: Dict[int, Tuple[int, int]], sessions: Set[int], me: int) -> Set[int]:
    found = {pid for pid, (_, sid) in procs.items() if sid in sessions} | orphans(procs)
    grew = True
    while grew:
        more = {pid for pid, (ppid, _) in procs.items() if ppid in found} - found
        found |= more
        grew = bool(more)
    found.discard(me)
    return found


def main() -> int:
    marker = b"PLANACT_SERVICE=" + sys.argv[1].encode()
    me = os.getpid()
    sessions = {
        pid
        for pid, (ppid, sid) in table().items()
        if ppid == 0 and sid == pid and pid != 1 and marked(pid, marker)
    }
    if not sessions:
        return 0
    for _ in range(400):
        left = victims(table(), sessions, me)
        if not left:
            return 0
        for pid in left:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.01)
    return 1


if __name__ == "__main__":
    sys.exit(main())
