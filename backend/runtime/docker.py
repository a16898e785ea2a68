"""DockerRuntime: commands run in one locked-down container per conversation workspace.

File actions stay host-side in :class:`BaseRuntime` (the workspace is bind-mounted at
``/workspace``), so confinement, caps and results are the same as the local runtime's; only
``terminal_run`` goes into the container. The container is created on first use, reused by
the conversation, removed after ``sandbox_idle_timeout`` of idleness, on ``forget`` and on
``close``; ``start`` removes the ones a crashed server left behind.

Commands go to a long-lived command runner in the container (``AGENT``: python3 reading
JSON requests on the stdin of one ``docker exec``), which runs each one in its own session,
enforces the timeout inside the container, kills the whole process group when the command
times out, is cancelled, or ends, and reports OOM kills. Images without python3 get one
``docker exec`` per command under a bash wrapper (``WRAPPER``) with the same guarantees,
reporting through a trailer line of stderr marked with a per-run nonce.

Layout: constants and the two in-container scripts; ``_Agent`` (host side of the runner);
``DockerRuntime``: lifecycle, BaseRuntime hooks, the runner path, the exec path, containers,
the idle reaper.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import logging
import os
import secrets
import socket
import threading
import time
import uuid
from collections.abc import Awaitable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import docker.errors
import requests
from docker.client import DockerClient
from docker.constants import DEFAULT_DOCKER_API_VERSION
from docker.types import Mount
from docker.utils import parse_bytes, version_lt
from docker.utils.socket import frames_iter

from backend.runtime.base import (
    BaseRuntime,
    CommandOutput,
    HeadTail,
    OutputCallback,
    PromptNote,
    RuntimeUnavailable,
    hand_output,
)

if TYPE_CHECKING:
    from backend.config import Settings

log = logging.getLogger(__name__)

LABEL = "planact.sandbox"
LABEL_ROOT = "planact.root"
LABEL_WORKSPACE = "planact.workspace"
LABEL_OWNER = "planact.owner"
TMP_MAX = 256 * 1024 * 1024  # default size of the sandbox's /tmp: at most this...
TMP_SHARE = 4  # ...and at most a quarter of the memory limit
SANDBOX_DIR = "/workspace"
NOBODY = 65534
DEFAULT_UID = 1000  # who a root-owned workspace is handed to: the sandbox is never root
KILL_GRACE = 15.0  # seconds past the timeout before the server kills a command itself
MIN_API_VERSION = "1.25"  # init, pids_limit, mounts
API_ERRORS = (docker.errors.DockerException, requests.RequestException, OSError)

# $1 run id, $2 timeout (seconds), $3 the command. Runs as the exec's session leader; its
# own stderr goes to /dev/null (bash's job notices), the command's and the trailer to fd 3.
WRAPPER = r"""
f=/tmp/.planact-$1
oomk() {
  K=0
  local x k v
  for x in /sys/fs/cgroup/memory.events /sys/fs/cgroup/memory/memory.oom_control; do
    if [ -r "$x" ]; then
      while read -r k v; do [ "$k" = oom_kill ] && K=$v; done < "$x"
      return 0
    fi
  done
}
oomk; o=$K
printf '@planact-start:%s\n' "$1" >&2
exec 3>&2 2>/dev/null
set -m
bash -c "$3" </dev/null 2>&3 3>&- &
c=$!
( sleep "$2"; : > "$f.t"; kill -KILL -- "-$c" ) </dev/null >/dev/null 3>&- &
w=$!
echo "$c $w" > "$f"
wait "$c"; rc=$?
kill -KILL -- "-$c" "-$w" 2>/dev/null
t=0; [ -e "$f.t" ] && t=1
oomk; m=0; [ "$K" != "$o" ] && m=1
rm -f -- "$f" "$f.t"
printf '\n@planact:%s:%s:%s:%s\n' "$1" "$rc" "$t" "$m" >&3
exit "$rc"
"""

# $1 run id: kill the command's process group (and the watchdog) of that run.
KILLER = r"""
f=/tmp/.planact-$1; i=0
while [ ! -s "$f" ] && [ "$i" -lt 100 ]; do sleep 0.01; i=$((i+1)); done
if [ -s "$f" ]; then read -r c w < "$f"; kill -KILL -- "-$c" "-$w" 2>/dev/null; fi
exit 0
"""

# Kill every process of the sandbox user but this script (the exec path's clean-up when no
# other command runs in the sandbox); returns once none is left. Builtins only in the loop.
SWEEPER = r"""
for ((i = 0; i < 400; i++)); do
  kill -KILL -1 2>/dev/null
  left=0
  for d in /proc/[0-9]*; do
    [ "${d#/proc/}" = "$$" ] && continue
    st=; uid=
    { while read -r k v _; do
        case $k in State:) st=$v ;; Uid:) uid=$v; break ;; esac
      done < "$d/status"; } 2>/dev/null
    [ "$uid" = "$UID" ] && [ "$st" != Z ] && left=1
  done
  [ "$left" = 0 ] && exit 0
  sleep 0.01
done
exit 1
"""

# The command runner: one per sandbox, started with `docker exec -i python3 -c AGENT`.
# Reads JSON requests on stdin, runs each command as `bash -c` in a new session, streams its
# output and reports its end as JSON lines on stdout. It enforces the timeouts itself (the
# limit holds inside the container), kills a command's whole process group when it times
# out, is killed, or ends, and, whenever no command is left running, every process of the
# sandbox user but itself (what escaped the group: setsid, double forks) before it reports
# the end. It kills everything and exits when stdin closes (the server went away).
AGENT = r"""
import base64, json, os, selectors, signal, subprocess, sys, time

def oom_kills():
    for path in ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control"):
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

def send(msg):
    view = memoryview(json.dumps(msg, separators=(",", ":")).encode() + b"\n")
    while view:
        view = view[os.write(1, view):]

def killpg(pid):
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass

ME, UID = os.getpid(), os.getuid()

def leftovers():
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == ME:
            continue
        state = uid = None
        try:
            with open("/proc/%s/status" % entry) as fh:
                for line in fh:
                    if line.startswith("State:"):
                        state = line.split()[1]
                    elif line.startswith("Uid:"):
                        uid = int(line.split()[1])
                        break
        except (OSError, ValueError, IndexError):
            continue
        if uid == UID and state != "Z":
            found.append(entry)
    return found

def sweep():
    # no command is running: every process of the sandbox user but this runner is a
    # leftover (setsid, double forks): kill them all and make sure they are gone
    for _ in range(400):
        if not leftovers():
            return
        try:
            os.kill(-1, signal.SIGKILL)
        except OSError:
            pass
        time.sleep(0.005)

class Run:
    def __init__(self, rid, proc, timeout):
        self.id, self.proc = rid, proc
        self.deadline = time.monotonic() + timeout
        self.grace = None
        self.open = 2
        self.timed_out = self.killed = False
        self.oom0 = oom_kills()

sel = selectors.DefaultSelector()
wake_r, wake_w = os.pipe()
os.set_blocking(wake_r, False)
os.set_blocking(wake_w, False)
signal.set_wakeup_fd(wake_w)
signal.signal(signal.SIGCHLD, lambda *_: None)
sel.register(wake_r, selectors.EVENT_READ, ("wake", None))
sel.register(0, selectors.EVENT_READ, ("in", None))
runs = {}
pending = b""
send({"hello": os.getpid()})

def start(msg):
    rid = msg["id"]
    try:
        proc = subprocess.Popen(
            ["bash", "-c", msg["cmd"]], cwd=msg["cwd"], stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
        )
    except OSError as exc:
        send({"id": rid, "error": "could not start the command: %s" % (exc.strerror or exc)})
        return
    run = Run(rid, proc, float(msg["timeout"]))
    runs[rid] = run
    for kind, pipe in (("out", proc.stdout), ("err", proc.stderr)):
        os.set_blocking(pipe.fileno(), False)
        sel.register(pipe.fileno(), selectors.EVENT_READ, (kind, run))

def close_pipes(run):
    for pipe in (run.proc.stdout, run.proc.stderr):
        try:
            sel.unregister(pipe.fileno())
        except (KeyError, ValueError):
            pass
        pipe.close()

while True:
    now = time.monotonic()
    waits = [(r.grace if r.grace is not None else r.deadline) - now for r in runs.values()]
    events = sel.select(max(0.0, min(waits)) if waits else None)
    for key, _ in events:
        kind, run = key.data
        if kind == "wake":
            try:
                os.read(wake_r, 4096)
            except BlockingIOError:
                pass
        elif kind == "in":
            try:
                data = os.read(0, 1 << 16)
            except BlockingIOError:
                continue
            if not data:
                for r in runs.values():
                    killpg(r.proc.pid)
                sweep()
                sys.exit(0)
            pending += data
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                msg = json.loads(line)
                if msg["op"] == "run":
                    start(msg)
                elif msg["op"] == "kill" and msg["id"] in runs:
                    runs[msg["id"]].killed = True
                    killpg(runs[msg["id"]].proc.pid)
        else:
            try:
                data = os.read(key.fd, 1 << 16)
            except BlockingIOError:
                continue
            if data:
                send({"id": run.id, kind: base64.b64encode(data).decode()})
            else:
                sel.unregister(key.fd)
                run.open -= 1
    now = time.monotonic()
    for run in list(runs.values()):
        if run.grace is None:
            if run.proc.poll() is not None:
                killpg(run.proc.pid)
                if len(runs) == 1:
                    sweep()
                run.grace = now + 2.0
            elif now >= run.deadline:
                run.timed_out = True
                killpg(run.proc.pid)
                run.proc.wait()
                if len(runs) == 1:
                    sweep()
                run.grace = now + 2.0
        if run.grace is not None and (run.open == 0 or now >= run.grace):
            close_pipes(run)
            code = run.proc.returncode
            code = 128 - code if code < 0 else code
            oom = code == 137 and not (run.timed_out or run.killed) and oom_kills() > run.oom0
            del runs[run.id]
            if not runs:
                sweep()
            send({"id": run.id, "exit": code, "timeout": run.timed_out, "oom": oom})
"""

ENVIRONMENT = {
    "HOME": "/tmp",
    "TMPDIR": "/tmp",
    "USER": "sandbox",
    "LOGNAME": "sandbox",
    "LANG": "C.UTF-8",
    "PYTHONUNBUFFERED": "1",
    "GIT_AUTHOR_NAME": "planact",
    "GIT_AUTHOR_EMAIL": "planact@localhost",
    "GIT_COMMITTER_NAME": "planact",
    "GIT_COMMITTER_EMAIL": "planact@localhost",
}


@dataclass
class _Sandbox:
    key: str
    container_id: str
    user: str
    last_used: float = field(default_factory=time.monotonic)
    busy: int = 0
    agent: _Agent | None = None
    no_agent: bool = False  # the image cannot run the runner (no python3): exec per command
    had_agent: bool = False  # a runner started here once: a runner that cannot start now
    # means a broken sandbox (replaced), not an image without python3
    agent_lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class _Run:
    """One exec: its stream, so that another thread can close it, and whether it started."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.started = False
        self.abandoned = False
        self.stream: Any = None

    def abandon(self) -> bool:
        """Stop the run from starting; True when it had already started."""
        with self.lock:
            self.abandoned = True
            return self.started

    def close_stream(self) -> None:
        with self.lock:
            stream = self.stream
        if stream is not None:
            _close_stream(stream)


class _AgentGone(Exception):
    """The command runner of a sandbox stopped (killed, or its container went away)."""


class _AgentRun:
    def __init__(
        self, loop: asyncio.AbstractEventLoop, on_output: OutputCallback | None = None
    ) -> None:
        self.out, self.err = HeadTail(), HeadTail()
        self.on_output = on_output  # live output, on the event loop (see _dispatch)
        self.done: asyncio.Future[dict[str, Any]] = loop.create_future()
        self.done.add_done_callback(_retrieve)  # nobody may wait any more (cancelled)


class _Agent:
    """Host side of a sandbox's command runner (see AGENT): requests out, events in.

    A reader thread parses the runner's JSON lines and hands them to the event loop.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, sock: Any) -> None:
        self.loop = loop
        self.sock = sock  # the hijacked stream (a SocketIO over a unix socket)
        self.raw: socket.socket = getattr(sock, "_sock", sock)
        self.alive = True
        self.runs: dict[str, _AgentRun] = {}
        self.hello: asyncio.Future[int] = loop.create_future()
        self.hello.add_done_callback(_retrieve)
        self._write_lock = threading.Lock()
        self.thread = threading.Thread(target=self._read, name="planact-sandbox-io", daemon=True)
        self.thread.start()

    def _read(self) -> None:
        buf = bytearray()
        try:
            for stream, data in frames_iter(self.sock, tty=False):
                if stream != 1:
                    log.debug("sandbox runner stderr: %r", data[:2000])
                    continue
                buf += data
                while (nl := buf.find(b"\n")) >= 0:
                    line = bytes(buf[:nl])
                    del buf[: nl + 1]
                    self._post(self._dispatch, json.loads(line))
        except Exception as exc:  # the socket was shut down or broke
            log.debug("sandbox runner stream ended: %s", exc)
        finally:
            for closing in (self.raw, self.sock, getattr(self.sock, "_response", None)):
                with contextlib.suppress(Exception):
                    closing.close()  # type: ignore[union-attr]
            self._post(self._gone)

    def _post(self, fn: Any, *args: Any) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
            self.loop.call_soon_threadsafe(fn, *args)

    def _dispatch(self, msg: dict[str, Any]) -> None:
        if "hello" in msg:
            if not self.hello.done():
                self.hello.set_result(int(msg["hello"]))
            return
        run = self.runs.get(msg.get("id", ""))
        if run is None:
            return
        if "out" in msg:
            data = base64.b64decode(msg["out"])
            run.out.feed(data)
            hand_output(run.on_output, "stdout", data)
        elif "err" in msg:
            data = base64.b64decode(msg["err"])
            run.err.feed(data)
            hand_output(run.on_output, "stderr", data)
        else:
            del self.runs[msg["id"]]
            if not run.done.done():
                run.done.set_result(msg)

    def _gone(self) -> None:
        self.alive = False
        if not self.hello.done():
            self.hello.set_exception(_AgentGone())
        runs, self.runs = self.runs, {}
        for run in runs.values():
            if not run.done.done():
                run.done.set_exception(_AgentGone())

    def _send(self, msg: dict[str, Any]) -> None:
        data = json.dumps(msg).encode() + b"\n"
        with self._write_lock:
            self.raw.sendall(data)

    def submit(
        self,
        rid: str,
        command: str,
        cwd: str,
        timeout: float,
        on_output: OutputCallback | None = None,
    ) -> _AgentRun:
        if not self.alive:
            raise _AgentGone
        run = _AgentRun(self.loop, on_output)
        self.runs[rid] = run
        try:
            self._send({"op": "run", "id": rid, "cmd": command, "cwd": cwd, "timeout": timeout})
        except OSError as exc:
            del self.runs[rid]
            raise _AgentGone from exc
        return run

    def kill(self, rid: str) -> None:
        with contextlib.suppress(OSError):
            self._send({"op": "kill", "id": rid})

    def close(self) -> None:
        """Hang up: the runner kills its commands and exits; the reader thread ends."""
        self.alive = False
        with contextlib.suppress(OSError):
            self.raw.shutdown(socket.SHUT_RDWR)


class DockerRuntime(BaseRuntime):
    name = "docker"
    prompt_note = PromptNote(
        planning="in a Docker sandbox", thinking="a Docker sandbox; the folder is /workspace"
    )
    always_available = False  # offered once an engine answers and the image exists
    unavailable_note = (
        "no Docker engine answers, or the sandbox image is missing: see docs/docker.md"
    )

    @classmethod
    def from_settings(cls, settings: Settings, *, owner: str | None = None) -> DockerRuntime:
        return cls(settings, owner=owner)

    def __init__(
        self,
        settings: Settings,
        *,
        base_url: str | None = None,
        runner: bool = True,
        owner: str | None = None,
    ) -> None:
        """``runner=False``: one ``docker exec`` per command instead of the sandbox's
        long-lived command runner (slower; what images without python3 get anyway).

        ``owner``: the instance id of the process (default: a fresh uuid hex). Sandboxes are
        labelled ``planact.owner=<owner>``; a runtime removes only its own, and those of the
        owners :meth:`reap_owners` is given.
        """
        super().__init__(
            terminal_timeout=settings.terminal_timeout,
            workspace_max_mb=settings.workspace_max_mb,
        )
        self.owner = owner or uuid.uuid4().hex
        self.use_runner = runner
        self.settings = settings
        self.image = settings.sandbox_image
        self.idle_timeout = settings.sandbox_idle_timeout
        self._base_url = base_url
        self._root = os.path.realpath(settings.workspace_dir)
        # what tells this deployment's sandboxes apart on a shared engine: the workspace as
        # the engine sees it (in a container WORKSPACE_DIR alone is the same everywhere)
        self._owner_label = str(settings.sandbox_host_workspace_dir or self._root)
        self._client: DockerClient | None = None
        self._client_lock = asyncio.Lock()
        self._sandboxes: dict[str, _Sandbox] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._owners: dict[str, tuple[int, int]] = {}
        self._reaper: asyncio.Task[None] | None = None
        self._engine_cpus: int | None = None
        self._closed = False
        self._creating: set[asyncio.Future[_Sandbox]] = set()  # creations in flight
        self._created: set[str] = set()  # ids of containers made here and not removed yet

    # ---- lifecycle -------------------------------------------------------------------

    async def start(self) -> None:
        """Start the idle reaper; remove sandboxes left under this owner id (a restart that
        kept its id) or without an owner label (an older version). Other owners' sandboxes
        are left alone: :meth:`reap_owners` removes those of owners known to be dead."""
        try:
            client = await self._get_client()
            removed = await anyio.to_thread.run_sync(self._reap_orphans, client)
        except RuntimeUnavailable as exc:
            log.warning("docker runtime: %s", exc)
            return
        except API_ERRORS as exc:
            log.warning("docker runtime: could not reap orphaned sandboxes: %s", exc)
            return
        if removed:
            log.info("docker runtime: removed %d orphaned sandbox container(s)", removed)
        self._ensure_reaper()

    async def available(self) -> bool:
        """Whether an engine answers and the sandbox image exists (the server's probe)."""
        try:
            client = await self._get_client()
            await anyio.to_thread.run_sync(client.images.get, self.image)
        except RuntimeUnavailable as exc:
            log.info("docker runtime unavailable: %s", exc)
            return False
        except API_ERRORS as exc:
            log.info("docker runtime unavailable: image %s: %s", self.image, _short(exc))
            return False
        return True

    async def forget(self, workspace: Path) -> None:
        key = os.path.realpath(workspace)
        async with self._lock_for(key):
            sandbox = self._sandboxes.pop(key, None)
            self._owners.pop(key, None)
            if sandbox is not None and sandbox.agent is not None:
                sandbox.agent.close()
                sandbox.agent = None
            if self._client is None:
                return
            client = self._client
            try:
                await anyio.to_thread.run_sync(self._remove_workspace, client, key, sandbox)
            except API_ERRORS as exc:
                log.warning("docker runtime: could not remove the sandbox of %s: %s", key, exc)

    async def reap_owners(self, owners: Iterable[str]) -> int:
        """Remove the sandboxes of the given owners (dead processes: their lease expired).

        Our own owner id is never reaped. Returns how many containers were removed.
        """
        wanted = {o for o in owners if o and o != self.owner}
        if not wanted:
            return 0
        client = await self._get_client()

        def reap() -> int:
            removed = 0
            for owner in sorted(wanted):
                filters = {"label": [f"{LABEL}=1", f"{LABEL_OWNER}={owner}"]}
                for info in client.api.containers(all=True, filters=filters):
                    with contextlib.suppress(docker.errors.NotFound):
                        _remove_container(client, info["Id"])
                        removed += 1
            return removed

        removed = await anyio.to_thread.run_sync(reap)
        if removed:
            log.info("docker runtime: removed %d sandbox(es) of dead owners", removed)
        return removed

    async def close(self) -> None:
        """Remove every sandbox this runtime started, those being created included.

        The runtime starts no sandbox afterwards (a command gets a failure result).
        """
        self._closed = True
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
            self._reaper = None
        if self._creating:  # a creation in flight ends with a container to remove
            await asyncio.wait(set(self._creating), timeout=120)
        sandboxes, self._sandboxes = list(self._sandboxes.values()), {}
        client, self._client = self._client, None
        if client is None:
            return
        ids = set(self._created)
        for sandbox in sandboxes:
            ids.add(sandbox.container_id)
            agent, sandbox.agent = sandbox.agent, None
            if agent is not None:
                agent.close()
                await anyio.to_thread.run_sync(agent.thread.join, 5)

        def remove_all() -> None:
            with contextlib.suppress(*API_ERRORS):
                filters = {"label": [f"{LABEL}=1", f"{LABEL_OWNER}={self.owner}"]}
                ids.update(info["Id"] for info in client.api.containers(all=True, filters=filters))
            for container_id in ids:
                with contextlib.suppress(*API_ERRORS):
                    _remove_container(client, container_id)
                self._created.discard(container_id)

        await anyio.to_thread.run_sync(remove_all)
        with contextlib.suppress(*API_ERRORS):
            client.close()

    # ---- BaseRuntime hooks -----------------------------------------------------------

    async def _prepare(self, workspace: Path) -> None:
        key = os.path.realpath(workspace)
        if key not in self._owners:
            self._owners[key] = await anyio.to_thread.run_sync(self._claim_workspace, key)

    def _file_owner(self, workspace: Path) -> tuple[int, int] | None:
        if os.geteuid() != 0:
            return None  # only root can give files away; ours are ours
        return self._owners.get(os.path.realpath(workspace))

    async def _run_command(
        self,
        command: str,
        workspace: Path,
        cwd: str,
        on_output: OutputCallback | None = None,
    ) -> CommandOutput:
        key = os.path.realpath(workspace)
        for attempt in (1, 2):
            sandbox = await self._acquire(key)
            # the runner kills every leftover of the sandbox user itself; without it (or
            # when it died) an exec does, once no other command runs in the sandbox
            sweep = True
            try:
                try:
                    agent = await self._agent_for(sandbox)
                    if agent is not None:
                        with contextlib.suppress(_AgentGone):  # hung up: use an exec
                            result = await self._agent_run(sandbox, agent, command, cwd, on_output)
                            sweep = not agent.alive
                            return result
                    exec_ids = await self._exec_create(sandbox, command, cwd)
                    return await self._exec_run(sandbox, exec_ids, on_output)
                except _ContainerGone:
                    # died while idle (killed from outside, engine restart) or its runner
                    # cannot start any more: start a fresh one
                    sweep = False
                    await self._drop(sandbox)
                    if attempt == 2:
                        raise RuntimeUnavailable("the sandbox container stops at once") from None
                    continue
            finally:
                if sweep and sandbox.busy == 1 and self._sandboxes.get(key) is sandbox:
                    await _shielded(self._sweep(sandbox))
                sandbox.busy -= 1
                sandbox.last_used = time.monotonic()
        raise AssertionError("unreachable")

    async def _sweep(self, sandbox: _Sandbox) -> None:
        """Kill every process of the sandbox user (no command of ours runs there now)."""
        client = self._client
        if client is None:
            return

        def sweep() -> None:
            try:
                exec_id = client.api.exec_create(
                    sandbox.container_id, ["bash", "-c", SWEEPER], user=sandbox.user
                )["Id"]
                client.api.exec_start(exec_id)
            except API_ERRORS as exc:
                log.debug("docker runtime: sweep of %s failed: %s", sandbox.key, exc)

        await anyio.to_thread.run_sync(sweep)

    # ---- the command runner ----------------------------------------------------------

    async def _agent_for(self, sandbox: _Sandbox) -> _Agent | None:
        if not self.use_runner or sandbox.no_agent:
            return None
        async with sandbox.agent_lock:
            if sandbox.agent is not None and sandbox.agent.alive:
                return sandbox.agent
            sandbox.agent = None
            client = await self._get_client()
            api: Any = client.api

            def start() -> Any:
                try:
                    exec_id = api.exec_create(
                        sandbox.container_id,
                        ["python3", "-u", "-c", AGENT],
                        stdin=True,
                        stdout=True,
                        stderr=True,
                        tty=False,
                        user=sandbox.user,
                        workdir=SANDBOX_DIR,
                    )["Id"]
                    sock = api.exec_start(exec_id, socket=True)
                except docker.errors.APIError as exc:
                    if _is_gone(exc):
                        raise _ContainerGone from exc
                    raise
                api._disable_socket_timeout(sock)
                return sock

            try:
                sock = await anyio.to_thread.run_sync(start)
            except _ContainerGone:
                raise
            except API_ERRORS as exc:
                raise RuntimeUnavailable(f"could not start the sandbox's runner: {exc}") from exc
            agent = _Agent(asyncio.get_running_loop(), sock)
            try:
                with anyio.fail_after(20):
                    await agent.hello
            except BaseException as exc:
                agent.close()
                if not isinstance(exc, (_AgentGone, TimeoutError)):
                    raise  # cancelled while starting
                if sandbox.had_agent:
                    # it ran here before: the sandbox is broken (memory or pids exhausted)
                    log.warning("docker runtime: the sandbox's runner cannot start; replacing it")
                    raise _ContainerGone from None
                log.warning(
                    "docker runtime: the command runner does not start in %s (no python3?); "
                    "running one docker exec per command",
                    self.image,
                )
                sandbox.no_agent = True
                return None
            sandbox.agent = agent
            sandbox.had_agent = True
            return agent

    async def _agent_run(
        self,
        sandbox: _Sandbox,
        agent: _Agent,
        command: str,
        cwd: str,
        on_output: OutputCallback | None = None,
    ) -> CommandOutput:
        rid = secrets.token_hex(8)
        workdir = SANDBOX_DIR if cwd == "." else f"{SANDBOX_DIR}/{cwd}"
        run = agent.submit(rid, command, workdir, max(self.terminal_timeout, 0.001), on_output)
        server_killed = False
        msg: dict[str, Any] | None = None
        try:
            with anyio.move_on_after(self.terminal_timeout + KILL_GRACE):
                msg = await asyncio.shield(run.done)
            if msg is None:
                # the runner did not end it in time: ask again, then give up on the runner
                server_killed = True
                agent.kill(rid)
                with anyio.move_on_after(5):
                    msg = await asyncio.shield(run.done)
                if msg is None:
                    agent.close()
                    await self._drop(sandbox)
        except _AgentGone:
            _, note = await self._post_mortem(sandbox, None)
            return CommandOutput(
                exit_code=None,
                stdout=run.out.value(),
                stderr=run.err.value(),
                note=note
                or "The sandbox's command runner stopped (was it killed?); the next command "
                "starts a new one.",
                stdout_dropped=run.out.dropped,
                stderr_dropped=run.err.dropped,
            )
        except BaseException:
            # cancelled (the run was stopped): the command dies before we go on
            agent.kill(rid)
            await _shielded(_settle(run.done, 5))
            raise
        if msg is not None and "error" in msg:
            raise RuntimeUnavailable(str(msg["error"]))
        timed_out = server_killed or bool(msg and msg.get("timeout"))
        note = ""
        if msg is not None and msg.get("oom"):
            note = (
                "killed: out of memory (the sandbox is limited to "
                f"{self.settings.sandbox_memory} of memory)"
            )
        return CommandOutput(
            exit_code=None if timed_out or msg is None else int(msg["exit"]),
            stdout=run.out.value(),
            stderr=run.err.value(),
            timed_out=timed_out,
            note=note,
            stdout_dropped=run.out.dropped,
            stderr_dropped=run.err.dropped,
        )

    # ---- the exec --------------------------------------------------------------------

    async def _exec_create(self, sandbox: _Sandbox, command: str, cwd: str) -> tuple[str, str]:
        client = await self._get_client()
        run_id = secrets.token_hex(8)
        workdir = SANDBOX_DIR if cwd == "." else f"{SANDBOX_DIR}/{cwd}"
        timeout = f"{max(self.terminal_timeout, 0.001):.3f}"
        argv = ["bash", "-c", WRAPPER, "planact", run_id, timeout, command]

        def create() -> str:
            try:
                created = client.api.exec_create(
                    sandbox.container_id,
                    argv,
                    stdout=True,
                    stderr=True,
                    stdin=False,
                    tty=False,
                    workdir=workdir,
                    user=sandbox.user,
                )
            except docker.errors.APIError as exc:
                if _is_gone(exc):  # "container ... is not running"
                    raise _ContainerGone from exc
                raise
            return str(created["Id"])

        try:
            return run_id, await anyio.to_thread.run_sync(create)
        except _ContainerGone:
            raise
        except API_ERRORS as exc:
            raise RuntimeUnavailable(f"could not start the command in the sandbox: {exc}") from exc

    async def _exec_run(
        self,
        sandbox: _Sandbox,
        exec_ids: tuple[str, str],
        on_output: OutputCallback | None = None,
    ) -> CommandOutput:
        run_id, exec_id = exec_ids
        client = await self._get_client()
        api: Any = client.api
        out, err = HeadTail(), HeadTail()
        run = _Run()
        live = _LiveExec(asyncio.get_running_loop(), on_output, run_id) if on_output else None

        def pump() -> None:
            with run.lock:
                if run.abandoned:
                    return
                try:
                    stream = api.exec_start(exec_id, stream=True, demux=True)
                except docker.errors.APIError as exc:
                    if _is_gone(exc):  # stopped since the exec was made: nothing ran
                        raise _ContainerGone from exc
                    raise
                run.started = True
                run.stream = stream
            try:
                # the stream may stay silent for the whole timeout: no socket timeout
                api._disable_socket_timeout(api._get_raw_response_socket(stream._response))
                for chunk_out, chunk_err in stream:
                    if chunk_out:
                        out.feed(chunk_out)
                    if chunk_err:
                        err.feed(chunk_err)
                    if live is not None:
                        live.feed(chunk_out, chunk_err)
            finally:
                _close_stream(stream)

        server_killed = False
        try:
            with anyio.move_on_after(self.terminal_timeout + KILL_GRACE) as deadline:
                await anyio.to_thread.run_sync(pump, abandon_on_cancel=True)
            if deadline.cancelled_caught:
                # the wrapper did not end it (e.g. the sandbox could not fork): do it here
                server_killed = True
                await self._kill_run(sandbox, run, run_id)
        except _ContainerGone:
            raise
        except BaseException:
            # cancelled (the run was stopped) or the engine went away: the command dies too
            await _shielded(self._kill_run(sandbox, run, run_id))
            raise

        stderr = err.value()
        started = f"@planact-start:{run_id}\n".encode()
        if stderr.startswith(started):
            stderr = stderr[len(started) :]
        elif not server_killed:
            # the wrapper never ran: the engine could not start a process in the sandbox
            # (out of memory or pids): replace it; the command has not run
            log.warning("docker runtime: no process starts in the sandbox; replacing it")
            raise _ContainerGone
        trailer = stderr.rfind(f"\n@planact:{run_id}:".encode())
        if trailer >= 0 and not server_killed:
            fields = stderr[trailer:].decode("ascii", "replace").strip().split(":")
            stderr = stderr[:trailer]
            exit_code, timed_out, oom = int(fields[2]), fields[3] == "1", fields[4] == "1"
            note = ""
            if oom and exit_code == 137:
                note = (
                    "killed: out of memory (the sandbox is limited to "
                    f"{self.settings.sandbox_memory} of memory)"
                )
            return CommandOutput(
                exit_code=None if timed_out else exit_code,
                stdout=out.value(),
                stderr=stderr,
                timed_out=timed_out,
                note=note,
                stdout_dropped=out.dropped,
                stderr_dropped=err.dropped,
            )
        # no trailer: the wrapper itself was killed, or the container went away
        code, note = await self._post_mortem(sandbox, exec_id)
        return CommandOutput(
            exit_code=None if server_killed else code,
            stdout=out.value(),
            stderr=stderr,
            timed_out=server_killed,
            note=note,
            stdout_dropped=out.dropped,
            stderr_dropped=err.dropped,
        )

    async def _kill_run(self, sandbox: _Sandbox, run: _Run, run_id: str) -> None:
        """Kill a run's processes inside the container (cancel, or the server's deadline)."""
        if not run.abandon():
            return  # never started
        client = self._client
        if client is None:
            return

        def kill() -> None:
            try:
                client.api.exec_start(
                    client.api.exec_create(
                        sandbox.container_id,
                        ["bash", "-c", KILLER, "planact-kill", run_id],
                        user=sandbox.user,
                    )["Id"]
                )
            except API_ERRORS as exc:
                log.warning(
                    "docker runtime: could not kill run %s, killing its sandbox: %s", run_id, exc
                )
                with contextlib.suppress(*API_ERRORS):
                    client.api.kill(sandbox.container_id)
            run.close_stream()

        await anyio.to_thread.run_sync(kill)

    async def _post_mortem(self, sandbox: _Sandbox, exec_id: str | None) -> tuple[int | None, str]:
        client = await self._get_client()

        def inspect() -> tuple[int | None, dict[str, Any] | None]:
            code: int | None = None
            if exec_id is not None:
                with contextlib.suppress(*API_ERRORS):
                    code = client.api.exec_inspect(exec_id).get("ExitCode")
            state: dict[str, Any] | None = None
            with contextlib.suppress(*API_ERRORS):
                state = client.api.inspect_container(sandbox.container_id)["State"]
            return code, state

        code, state = await anyio.to_thread.run_sync(inspect)
        if state is None or not state.get("Running"):
            await self._drop(sandbox)
            why = " (out of memory)" if state and state.get("OOMKilled") else ""
            return code, (
                f"The sandbox container stopped{why} while the command ran; the next command "
                "starts a fresh one (files in the workspace are kept)."
            )
        if code == 137:
            return code, (
                "killed by SIGKILL: out of memory (the sandbox is limited to "
                f"{self.settings.sandbox_memory}), or by another process"
            )
        return code, ""

    # ---- containers ------------------------------------------------------------------

    def _lock_for(self, key: str) -> asyncio.Lock:
        return self._locks.setdefault(key, asyncio.Lock())

    async def _acquire(self, key: str) -> _Sandbox:
        async with self._lock_for(key):
            sandbox = self._sandboxes.get(key)
            if sandbox is None:
                client = await self._get_client()
                owner = self._owners.get(key)
                if owner is None:
                    owner = await anyio.to_thread.run_sync(self._claim_workspace, key)
                    self._owners[key] = owner
                if self._closed:
                    raise RuntimeUnavailable("the server is shutting down")
                # the creation goes on if we are cancelled: close() waits for it and removes
                # what it made
                creation = asyncio.ensure_future(
                    anyio.to_thread.run_sync(self._create, client, key, owner)
                )
                self._creating.add(creation)
                creation.add_done_callback(self._creating.discard)
                creation.add_done_callback(_retrieve)
                try:
                    sandbox = await asyncio.shield(creation)
                except RuntimeUnavailable:
                    raise
                except API_ERRORS as exc:
                    raise RuntimeUnavailable(f"could not start a sandbox container: {exc}") from exc
                if self._closed:
                    await self._drop(sandbox)
                    raise RuntimeUnavailable("the server is shutting down")
                self._sandboxes[key] = sandbox
                self._ensure_reaper()
            sandbox.busy += 1
            sandbox.last_used = time.monotonic()
            return sandbox

    async def _drop(self, sandbox: _Sandbox) -> None:
        if sandbox.agent is not None:
            sandbox.agent.close()
            sandbox.agent = None
        if self._sandboxes.get(sandbox.key) is sandbox:
            del self._sandboxes[sandbox.key]
        client = self._client
        if client is not None:
            with contextlib.suppress(*API_ERRORS):
                await anyio.to_thread.run_sync(_remove_container, client, sandbox.container_id)
                self._created.discard(sandbox.container_id)

    async def _get_client(self) -> DockerClient:
        if self._client is not None:
            return self._client
        async with self._client_lock:
            if self._client is None:

                def make(version: str, timeout: int) -> DockerClient:
                    if self._base_url:
                        return DockerClient(
                            base_url=self._base_url, version=version, timeout=timeout
                        )
                    return DockerClient.from_env(version=version, timeout=timeout)

                def connect() -> DockerClient:
                    _probe_unix_socket(self._base_url or os.environ.get("DOCKER_HOST"))
                    # an explicit version: "auto" asks the engine inside the constructor
                    # and leaks the connection when that fails
                    probe = make(MIN_API_VERSION, 10)
                    try:
                        server = str(probe.version()["ApiVersion"])
                    finally:
                        probe.close()
                    if version_lt(DEFAULT_DOCKER_API_VERSION, server):
                        server = DEFAULT_DOCKER_API_VERSION
                    return make(server, 60)

                try:
                    self._client = await anyio.to_thread.run_sync(connect)
                except API_ERRORS as exc:
                    where = self._base_url or os.environ.get("DOCKER_HOST") or "the default socket"
                    raise RuntimeUnavailable(
                        f"no Docker engine answers at {where} ({_short(exc)}). Start Docker, "
                        "or set RUNTIME=local."
                    ) from exc
            assert self._client is not None
            return self._client

    def _claim_workspace(self, key: str) -> tuple[int, int]:
        """The uid/gid commands run as: the workspace owner's, never root's.

        SANDBOX_UID / SANDBOX_GID override. A root-owned workspace (the server runs as root,
        e.g. in a container) is handed to uid 1000 so that the sandbox user can write to it.
        """
        st = os.stat(key)
        uid_set, gid_set = self.settings.sandbox_uid, self.settings.sandbox_gid
        uid = uid_set if uid_set is not None else (st.st_uid or DEFAULT_UID)
        if gid_set is not None:
            gid = gid_set
        elif uid_set is None and st.st_uid:
            gid = st.st_gid
        else:
            gid = uid
        if uid == 0:
            raise RuntimeUnavailable("SANDBOX_UID=0: the sandbox refuses to run commands as root")
        if st.st_uid == 0 and os.geteuid() == 0:
            _hand_over(key, uid, gid)
        return uid, gid

    def _host_path(self, key: str) -> str:
        host_dir = self.settings.sandbox_host_workspace_dir
        if host_dir is None:
            return key
        try:
            rel = Path(key).relative_to(self._root)
        except ValueError:
            raise RuntimeUnavailable(
                f"workspace {key} is outside WORKSPACE_DIR ({self._root}), so it cannot be "
                "mapped onto SANDBOX_HOST_WORKSPACE_DIR"
            ) from None
        return str(Path(host_dir) / rel)

    def _create(self, client: DockerClient, key: str, owner: tuple[int, int]) -> _Sandbox:
        try:
            client.images.get(self.image)
        except docker.errors.ImageNotFound:
            raise RuntimeUnavailable(
                f"the sandbox image {self.image!r} does not exist. Build it with "
                "`make sandbox-image` (see docs/docker.md), or set RUNTIME=local."
            ) from None
        name = self._container_name(key)
        with contextlib.suppress(docker.errors.NotFound):
            _remove_container(client, name)  # ours, left by a cancelled start or forgotten
        user = f"{owner[0]}:{owner[1]}"
        # the container's own processes (init, sleep) run as another uid, so that a command
        # killing every process it may (kill -9 -1) cannot stop the container
        keeper = NOBODY if owner[0] != NOBODY else NOBODY - 1
        memory = self.settings.sandbox_memory
        container = client.containers.run(
            self.image,
            ["sleep", "infinity"],
            name=name,
            detach=True,
            init=True,
            user=f"{keeper}:{keeper}",
            working_dir=SANDBOX_DIR,
            hostname="sandbox",
            environment=ENVIRONMENT,
            labels={
                LABEL: "1",
                LABEL_ROOT: self._owner_label,
                LABEL_OWNER: self.owner,
                LABEL_WORKSPACE: key,
            },
            mounts=[Mount(SANDBOX_DIR, self._host_path(key), type="bind")],
            network_mode=self.settings.sandbox_network,
            mem_limit=memory,
            memswap_limit=memory,
            nano_cpus=int(self._cpus(client) * 1e9),
            pids_limit=self.settings.sandbox_pids,
            security_opt=["no-new-privileges"],
            cap_drop=["ALL"],
            read_only=True,
            tmpfs={"/tmp": f"rw,exec,nosuid,nodev,mode=1777,size={self.tmp_size}"},
        )
        self._created.add(str(container.id))
        return _Sandbox(key=key, container_id=str(container.id), user=user)

    def _container_name(self, key: str) -> str:
        """Unique per deployment, owner and conversation workspace."""
        ident = f"{self._owner_label}\0{self.owner}\0{key}"
        return "planact-sbx-" + hashlib.sha256(ident.encode()).hexdigest()[:20]

    @property
    def tmp_size(self) -> int:
        """Bytes of the sandbox's tmpfs /tmp (its pages count against the memory limit)."""
        if self.settings.sandbox_tmp_size:
            return int(parse_bytes(self.settings.sandbox_tmp_size))
        return min(TMP_MAX, int(parse_bytes(self.settings.sandbox_memory)) // TMP_SHARE)

    def _cpus(self, client: DockerClient) -> float:
        """SANDBOX_CPUS, at most the engine's CPU count (the engine refuses more)."""
        if self._engine_cpus is None:
            try:
                self._engine_cpus = int(client.info().get("NCPU") or 0)
            except API_ERRORS:
                self._engine_cpus = 0
        wanted = self.settings.sandbox_cpus
        return min(wanted, self._engine_cpus) if self._engine_cpus else wanted

    def _sandbox_containers(self, client: DockerClient, **labels: str) -> list[Any]:
        wanted = [f"{LABEL}=1", f"{LABEL_ROOT}={self._owner_label}"]
        wanted += [f"{k}={v}" for k, v in labels.items()]
        return list(client.api.containers(all=True, filters={"label": wanted}))

    def _reap_orphans(self, client: DockerClient) -> int:
        """Remove sandboxes of this deployment left under our owner id or with none."""
        ours = {s.container_id for s in self._sandboxes.values()}
        removed = 0
        for info in self._sandbox_containers(client):
            owner = (info.get("Labels") or {}).get(LABEL_OWNER)
            if info["Id"] not in ours and owner in (None, self.owner):
                with contextlib.suppress(docker.errors.NotFound):
                    _remove_container(client, info["Id"])
                    removed += 1
        return removed

    def _remove_workspace(self, client: DockerClient, key: str, sandbox: _Sandbox | None) -> None:
        ids = {info["Id"] for info in self._sandbox_containers(client, **{LABEL_WORKSPACE: key})}
        if sandbox is not None:
            ids.add(sandbox.container_id)
        for container_id in ids:
            with contextlib.suppress(docker.errors.NotFound):
                _remove_container(client, container_id)

    # ---- idle reaper -----------------------------------------------------------------

    def _ensure_reaper(self) -> None:
        if self._reaper is None or self._reaper.done():
            self._reaper = asyncio.get_running_loop().create_task(
                self._reap_idle(), name="planact-sandbox-reaper"
            )

    async def _reap_idle(self) -> None:
        interval = max(0.05, min(30.0, self.idle_timeout / 4))
        while True:
            await asyncio.sleep(interval)
            for key, sandbox in list(self._sandboxes.items()):
                if sandbox.busy or time.monotonic() - sandbox.last_used < self.idle_timeout:
                    continue
                async with self._lock_for(key):
                    idle = time.monotonic() - sandbox.last_used >= self.idle_timeout
                    if self._sandboxes.get(key) is sandbox and not sandbox.busy and idle:
                        log.info("docker runtime: removing idle sandbox of %s", key)
                        try:
                            await self._drop(sandbox)
                        except Exception:  # keep reaping the others
                            log.exception("docker runtime: removing an idle sandbox failed")


class _LiveExec:
    """Hands an exec's output to ``on_output`` on the event loop (from the pump thread).
    Standard error goes by whole lines, without the wrapper's own marker lines."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, on_output: OutputCallback, run_id: str
    ) -> None:
        self.loop = loop
        self.on_output = on_output
        self.markers = (f"@planact-start:{run_id}".encode(), f"@planact:{run_id}:".encode())
        self.err_line = bytearray()
        self.held_blank = False  # an empty line: the trailer's own line break, or output

    def feed(self, out: bytes | None, err: bytes | None) -> None:
        if out:
            self._post("stdout", out)
        if not err:
            return
        self.err_line += err
        cut = self.err_line.rfind(b"\n")
        if cut < 0:
            return
        lines, self.err_line = bytes(self.err_line[: cut + 1]), self.err_line[cut + 1 :]
        kept: list[bytes] = []
        for line in lines.splitlines(keepends=True):
            if line.startswith(self.markers):
                if line.startswith(self.markers[1]):
                    self.held_blank = False  # the trailer's leading line break
                continue
            if self.held_blank:
                kept.append(b"\n")
                self.held_blank = False
            if line == b"\n":
                self.held_blank = True
                continue
            kept.append(line)
        if kept:
            self._post("stderr", b"".join(kept))

    def _post(self, stream: str, data: bytes) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody listens
            self.loop.call_soon_threadsafe(hand_output, self.on_output, stream, data)


class _ContainerGone(Exception):
    pass


def _is_gone(exc: Exception) -> bool:
    """The engine's way of saying the container is not there or not running: 404, 409, or
    a 500 "is not running" when it stopped between creating and starting an exec."""
    if isinstance(exc, docker.errors.NotFound):
        return True
    if not isinstance(exc, docker.errors.APIError):
        return False
    return exc.status_code == 409 or "is not running" in str(exc.explanation or exc)


async def _shielded(work: Awaitable[Any]) -> None:
    """Run clean-up to its end even if the caller is cancelled (again) meanwhile."""
    task = asyncio.ensure_future(work)
    try:
        await asyncio.shield(task)
    except BaseException:
        task.add_done_callback(_retrieve)
        raise


async def _settle(done: asyncio.Future[Any], within: float) -> None:
    """Wait up to ``within`` seconds for a future, whatever it ends with."""
    with contextlib.suppress(Exception):
        async with asyncio.timeout(within):
            await asyncio.shield(done)


def _retrieve(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


def _close_stream(stream: Any) -> None:
    """Close an exec stream: shut its socket down (unblocks a reader) and the response."""
    with contextlib.suppress(Exception):
        stream.close()
    with contextlib.suppress(Exception):
        stream._response.close()


def _remove_container(client: DockerClient, container_id: str) -> None:
    client.api.remove_container(container_id, force=True, v=True)


def _hand_over(root: str, uid: int, gid: int) -> None:
    """Give a root-owned workspace and its root-owned entries to uid:gid.

    Descriptor-based (os.fwalk, ``*at`` calls): no symlink is followed, even one swapped in.
    """
    os.chown(root, uid, gid, follow_symlinks=False)
    for _folder, dirs, files, dir_fd in os.fwalk(root, follow_symlinks=False):
        for name in dirs + files:
            with contextlib.suppress(OSError):
                if os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_uid == 0:
                    os.chown(name, uid, gid, dir_fd=dir_fd, follow_symlinks=False)


def _probe_unix_socket(url: str | None) -> None:
    """Fail early, without leaking a socket, when a unix-socket engine is not there.

    (docker-py leaves the socket of a failed connect unclosed.)
    """
    url = url or "unix:///var/run/docker.sock"
    for prefix in ("unix://", "http+unix://"):
        if url.startswith(prefix):
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(5)
                sock.connect(url.removeprefix(prefix))
            return


def _short(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text if len(text) <= 200 else text[:200] + "…"
