"""The command runner: one per sandbox, inside it, started with `docker exec -i python3 -c`.

Reads JSON requests on stdin, one a line:
    {"op": "run", "id": ID, "cmd": COMMAND, "cwd": DIR, "timeout": SECONDS}
    {"op": "kill", "id": ID}
and writes JSON lines on stdout: {"hello": PID} once, then per run
    {"id": ID, "out": BASE64} / {"id": ID, "err": BASE64}   output as it is printed
    {"id": ID, "exit": CODE, "timeout": BOOL, "oom": BOOL, "oom_kill": BOOL}   the end
    {"id": ID, "error": TEXT}                                  it could not start
Runs each command as `bash -c` in a new session. It enforces the timeouts itself (the limit
holds inside the container), kills a command's whole process group when it times out, is
killed, or ends, and, whenever no command is left running, every process of the sandbox user
but itself and the previews' services (what escaped the group: setsid, double forks) before
it reports the end. It kills everything, services too, and exits when stdin closes (the
server went away).

Runs on the image's python3, whatever its version: standard library only, Python 3.6
syntax (typing generics, no ``from __future__``). Only ever inside a sandbox: it kills every
process of its user.
"""
# ruff: noqa: UP006, UP031, UP035, UP045

import base64
import contextlib
import json
import os
import selectors
import signal
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

OOM_FILES = ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control")
GRACE = 2.0  # seconds a finished command's pipes may stay open (a background child)


def oom_kills(paths: Tuple[str, ...] = OOM_FILES) -> int:
    """The cgroup's count of OOM kills (v2 memory.events, else v1), 0 if unknown."""
    for path in paths:
        try:
            with open(path) as fh:
                for line in fh:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        return int(value)
            return 0
        except (OSError, ValueError):
            continue
    return 0


def encode(msg: Dict[str, Any]) -> bytes:
    return json.dumps(msg, separators=(",", ":")).encode() + b"\n"


def send(msg: Dict[str, Any]) -> None:
    view = memoryview(encode(msg))
    while view:
        view = view[os.write(1, view) :]


def killpg(pid: int) -> None:
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)


def stat_of(pid: str, proc: str = "/proc") -> Tuple[int, int]:
    """(parent pid, session id) of a process; OSError/ValueError when it is gone."""
    with open("%s/%s/stat" % (proc, pid)) as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return int(fields[1]), int(fields[3])


def service_sessions(me: int, proc: str = "/proc") -> List[int]:
    """Sessions led by a live exec of the sandbox user other than this runner: a process
    whose parent is outside the container (pid 0) is one the server started with `docker
    exec` (a preview's service), never one a command made; what it starts stays in its
    session (setsid leaves it: then it is a leftover)."""
    found = []
    for entry in os.listdir(proc):
        if not entry.isdigit() or int(entry) in (me, 1):
            continue
        try:
            ppid, sid = stat_of(entry, proc)
        except (OSError, ValueError, IndexError):
            continue
        if ppid == 0 and sid == int(entry):
            found.append(sid)
    return found


def leftovers(me: int, uid: int, proc: str = "/proc", spare: Tuple[int, ...] = ()) -> List[str]:
    """Pids of the live (not zombie) processes of ``uid`` but ``me`` and those of the
    sessions ``spare``."""
    found = []
    for entry in os.listdir(proc):
        if not entry.isdigit() or int(entry) == me:
            continue
        state = owner = None
        try:
            with open("%s/%s/status" % (proc, entry)) as fh:
                for line in fh:
                    if line.startswith("State:"):
                        state = line.split()[1]
                    elif line.startswith("Uid:"):
                        owner = int(line.split()[1])
                        break
        except (OSError, ValueError, IndexError):
            continue
        if owner != uid or state == "Z":
            continue
        if spare:
            try:
                if stat_of(entry, proc)[1] in spare:
                    continue
            except (OSError, ValueError, IndexError):
                continue  # gone
        found.append(entry)
    return found


def sweep(everything: bool = False) -> None:
    """No command is running: every process of the sandbox user but this runner and the
    services (:func:`service_sessions`) is a leftover (setsid, double forks): kill them all
    and make sure they are gone. ``everything``: the services too (the server went away)."""
    me, uid = os.getpid(), os.getuid()
    for _ in range(400):
        spare = () if everything else tuple(service_sessions(me))
        left = leftovers(me, uid, spare=spare)
        if not left:
            return
        if not spare:
            with contextlib.suppress(OSError):
                os.kill(-1, signal.SIGKILL)
        for pid in left if spare else ():
            with contextlib.suppress(OSError):
                os.kill(int(pid), signal.SIGKILL)
        time.sleep(0.005)


def exit_code(returncode: int) -> int:
    """A shell's way: 128 + N for a command killed by signal N."""
    return 128 - returncode if returncode < 0 else returncode


class Run:
    def __init__(self, rid: str, proc: "subprocess.Popen[bytes]", timeout: float) -> None:
        self.id, self.proc = rid, proc
        self.deadline = time.monotonic() + timeout
        self.grace: Optional[float] = None
        self.open = 2
        self.timed_out = self.killed = False
        self.oom0 = oom_kills()


class Runner:
    def __init__(self) -> None:
        self.sel = selectors.DefaultSelector()
        self.wake_r, wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        self.sel.register(self.wake_r, selectors.EVENT_READ, ("wake", None))
        self.sel.register(0, selectors.EVENT_READ, ("in", None))
        self.runs: Dict[str, Run] = {}
        self.pending = b""

    def start(self, msg: Dict[str, Any]) -> None:
        rid = msg["id"]
        try:
            proc = subprocess.Popen(
                ["bash", "-c", msg["cmd"]],
                cwd=msg["cwd"],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            send({"id": rid, "error": "could not start the command: %s" % (exc.strerror or exc)})
            return
        run = Run(rid, proc, float(msg["timeout"]))
        self.runs[rid] = run
        for kind, pipe in (("out", proc.stdout), ("err", proc.stderr)):
            assert pipe is not None
            os.set_blocking(pipe.fileno(), False)
            self.sel.register(pipe.fileno(), selectors.EVENT_READ, (kind, run))

    def close_pipes(self, run: Run) -> None:
        for pipe in (run.proc.stdout, run.proc.stderr):
            assert pipe is not None
            with contextlib.suppress(KeyError, ValueError):
                self.sel.unregister(pipe.fileno())
            pipe.close()

    def requests(self, data: bytes) -> None:
        self.pending += data
        while b"\n" in self.pending:
            line, self.pending = self.pending.split(b"\n", 1)
            msg = json.loads(line)
            if msg["op"] == "run":
                self.start(msg)
            elif msg["op"] == "kill" and msg["id"] in self.runs:
                self.runs[msg["id"]].killed = True
                killpg(self.runs[msg["id"]].proc.pid)

    def hang_up(self) -> None:
        for run in self.runs.values():
            killpg(run.proc.pid)
        sweep(everything=True)
        sys.exit(0)

    def read(self, key: selectors.SelectorKey) -> None:
        kind, run = key.data
        if kind == "wake":
            with contextlib.suppress(BlockingIOError):
                os.read(self.wake_r, 4096)
            return
        try:
            data = os.read(key.fd, 1 << 16)
        except BlockingIOError:
            return
        if kind == "in":
            if not data:
                self.hang_up()
            self.requests(data)
        elif data:
            send({"id": run.id, kind: base64.b64encode(data).decode()})
        else:
            self.sel.unregister(key.fd)
            run.open -= 1

    def check(self, run: Run, now: float) -> None:
        """End ``run`` when its command ended or timed out and its pipes closed (or the
        grace for them passed)."""
        if run.grace is None:
            if run.proc.poll() is not None:
                killpg(run.proc.pid)
                if len(self.runs) == 1:
                    sweep()
                run.grace = now + GRACE
            elif now >= run.deadline:
                run.timed_out = True
                killpg(run.proc.pid)
                run.proc.wait()
                if len(self.runs) == 1:
                    sweep()
                run.grace = now + GRACE
        if run.grace is not None and (run.open == 0 or now >= run.grace):
            self.close_pipes(run)
            code = exit_code(run.proc.returncode)
            # oom_kill: memory ran out in the sandbox meanwhile (some process was killed);
            # oom: this command's own shell was the one
            oom_kill = oom_kills() > run.oom0
            oom = code == 137 and not (run.timed_out or run.killed) and oom_kill
            del self.runs[run.id]
            if not self.runs:
                sweep()
            send(
                {
                    "id": run.id,
                    "exit": code,
                    "timeout": run.timed_out,
                    "oom": oom,
                    "oom_kill": oom_kill,
                }
            )

    def serve(self) -> None:
        send({"hello": os.getpid()})
        while True:
            now = time.monotonic()
            waits = [
                (r.grace if r.grace is not None else r.deadline) - now for r in self.runs.values()
            ]
            for key, _ in self.sel.select(max(0.0, min(waits)) if waits else None):
                self.read(key)
            now = time.monotonic()
            for run in list(self.runs.values()):
                self.check(run, now)


if __name__ == "__main__":
    Runner().serve()
