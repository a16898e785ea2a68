"""Per-conversation control groups for the local runtime's sandbox (memory, processes, CPU).

Where the machine lets the server make child groups of its own (cgroup v1 controllers
mounted writable at ``/sys/fs/cgroup/<controller>``, as for a root server on a v1 or hybrid
host), each conversation's commands run in ``<server's group>/planact-<pid>-<n>/<conversation>``
of the ``memory``, ``pids`` and ``cpu`` controllers, capped at ``SANDBOX_MEMORY_MB`` (swap
included), ``SANDBOX_PIDS`` and ``SANDBOX_CPUS``. Commands of one conversation share one
group, so the caps hold for all of them together. The server moves the command's wrapper
(:mod:`backend.runtime.reaper`) into the groups while the wrapper starts, before it starts
bubblewrap (a move waits for an RCU grace period, ~10 ms: overlapped with the wrapper's
start-up); the groups are removed when the
runtime closes or the conversation is forgotten.

On a unified (v2) hierarchy mounted at ``/sys/fs/cgroup``, the server's own group must
be delegated to it with the three controllers (systemd ``Delegate=yes``): the server moves
into a leaf ``planact-server`` of it and makes ``planact-<pid>-<n>/<conversation>`` beside
it, capped by ``memory.max`` (``memory.swap.max`` 0), ``pids.max`` and ``cpu.max``. Where
neither works the runtime gets the rlimit fallback (docs/security.md).
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from backend.runtime.limits import SandboxLimits

log = logging.getLogger(__name__)

ROOT = Path("/sys/fs/cgroup")
CONTROLLERS = ("memory", "pids", "cpu")
CPU_PERIOD = 100_000  # microseconds
UNIFIED = "unified"  # the v2 hierarchy's entry in /proc/self/cgroup ("0::/path")
_serial = itertools.count(1)  # one parent group per runtime of this process


def own_paths(proc_cgroup: str = "/proc/self/cgroup") -> dict[str, str]:
    """controller -> this process's group in it (v1 lines ``N:a,b:/path``)."""
    found: dict[str, str] = {}
    with open(proc_cgroup, encoding="utf-8") as fh:
        for line in fh:
            _num, names, path = line.rstrip("\n").split(":", 2)
            for name in names.split(","):
                found[name or UNIFIED] = path
    return found


@dataclass
class Cgroups:
    """The server's parent groups (one per controller) and the conversations' groups in them."""

    limits: SandboxLimits
    bases: dict[str, Path]  # controller -> <server's group>/planact-<pid>-<n>
    made: set[str] = field(default_factory=set)

    @classmethod
    def detect(
        cls, limits: SandboxLimits, root: Path = ROOT, proc_cgroup: str = "/proc/self/cgroup"
    ) -> Cgroups | str:
        """The server's cgroups, made; or why there are none here (``root``: where the
        hierarchies are mounted, ``proc_cgroup``: the kernel's list of the server's groups)."""
        try:
            own = own_paths(proc_cgroup)
        except OSError as exc:
            return f"cannot read /proc/self/cgroup: {exc}"
        if (root / "cgroup.controllers").exists():
            return cls._detect_unified(limits, root / own.get(UNIFIED, "/").lstrip("/"))
        for name in CONTROLLERS:
            if name not in own or not (root / name / "cgroup.procs").exists():
                return f"no cgroup v1 {name} controller at {root / name}"
        serial = next(_serial)
        made = cls(limits, {})
        for name in CONTROLLERS:
            parent = root / name / own[name].lstrip("/")
            _sweep_dead(parent)
            base = parent / f"planact-{os.getpid()}-{serial}"
            try:
                base.mkdir(exist_ok=True)
            except OSError as exc:
                made.close()
                return f"cannot make a cgroup under {parent}: {exc.strerror or exc}"
            made.bases[name] = base
        return made

    @classmethod
    def _detect_unified(cls, limits: SandboxLimits, group: Path) -> Cgroups | str:
        """cgroup v2: the server's group must offer the controllers (a delegated group:
        systemd ``Delegate=yes``). Its children get them only when it holds no process
        (the kernel's "no internal processes" rule): the server first moves into a leaf of
        its own, ``planact-server``; another process sharing its group makes that fail."""
        try:
            offered = (group / "cgroup.controllers").read_text(encoding="ascii").split()
            missing = [name for name in CONTROLLERS if name not in offered]
            if missing:
                return (
                    f"cgroup v2: the server's group {group} does not offer "
                    f"{', '.join(missing)} (delegate them to it)"
                )
            wanted = " ".join(f"+{name}" for name in CONTROLLERS)
            enabled = (group / "cgroup.subtree_control").read_text(encoding="ascii").split()
            if any(name not in enabled for name in CONTROLLERS):
                leaf = group / "planact-server"
                leaf.mkdir(exist_ok=True)
                _write(leaf / "cgroup.procs", str(os.getpid()))
                _write(group / "cgroup.subtree_control", wanted)
            _sweep_dead(group)
            base = group / f"planact-{os.getpid()}-{next(_serial)}"
            base.mkdir(exist_ok=True)
        except OSError as exc:
            return f"cgroup v2: cannot use the server's group {group}: {exc.strerror or exc}"
        made = cls(limits, {UNIFIED: base})
        try:
            _write(base / "cgroup.subtree_control", wanted)
        except OSError as exc:
            made.close()
            return f"cgroup v2: cannot enable {wanted} under {base}: {exc.strerror or exc}"
        return made

    @property
    def unified(self) -> bool:
        return UNIFIED in self.bases

    @staticmethod
    def key(workspace: Path | str) -> str:
        return hashlib.sha256(os.path.realpath(workspace).encode()).hexdigest()[:16]

    def enter(self, workspace: Path | str) -> list[str]:
        """The ``cgroup.procs`` files a conversation's sandbox joins (its groups made and
        capped on first use)."""
        key = self.key(workspace)
        groups = {name: base / key for name, base in self.bases.items()}
        if key not in self.made:
            for group in groups.values():
                group.mkdir(exist_ok=True)
            if self.unified:
                self._cap_unified(groups[UNIFIED])
                self.made.add(key)
                return [str(groups[UNIFIED] / "cgroup.procs")]
            memory = str(self.limits.memory)
            _write(groups["memory"] / "memory.limit_in_bytes", memory)
            if (groups["memory"] / "memory.memsw.limit_in_bytes").exists():
                _write(groups["memory"] / "memory.memsw.limit_in_bytes", memory)
            _write(groups["pids"] / "pids.max", str(self.limits.pids))
            _write(groups["cpu"] / "cpu.cfs_period_us", str(CPU_PERIOD))
            _write(groups["cpu"] / "cpu.cfs_quota_us", str(int(self.limits.cpus * CPU_PERIOD)))
            self.made.add(key)
        return [str(group / "cgroup.procs") for group in groups.values()]

    def join(self, workspace: Path | str, pid: int) -> None:
        """Move process ``pid`` into the conversation's groups (blocks: a migration waits
        for an RCU grace period, ~10 ms here; call it on a worker thread)."""
        for procs in self.enter(workspace):
            _write(Path(procs), str(pid))

    def _cap_unified(self, group: Path) -> None:
        _write(group / "memory.max", str(self.limits.memory))
        if (group / "memory.swap.max").exists():
            _write(group / "memory.swap.max", "0")
        _write(group / "pids.max", str(self.limits.pids))
        _write(group / "cpu.max", f"{int(self.limits.cpus * CPU_PERIOD)} {CPU_PERIOD}")

    def oom_kills(self, workspace: Path | str) -> int:
        """How many processes the memory cap has killed in the conversation's group."""
        if self.unified:
            path = self.bases[UNIFIED] / self.key(workspace) / "memory.events"
        else:
            path = self.bases["memory"] / self.key(workspace) / "memory.oom_control"
        try:
            for line in path.read_text(encoding="utf-8").splitlines():
                name, _, value = line.partition(" ")
                if name == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def forget(self, workspace: Path | str) -> None:
        key = self.key(workspace)
        self.made.discard(key)
        for base in self.bases.values():
            with contextlib.suppress(OSError):  # busy (a command runs) or gone
                (base / key).rmdir()

    def close(self) -> None:
        for base in self.bases.values():
            for group in list(base.iterdir()) if base.is_dir() else []:
                if group.is_dir():
                    with contextlib.suppress(OSError):
                        group.rmdir()
            with contextlib.suppress(OSError):
                base.rmdir()
        self.made.clear()


def _sweep_dead(parent: Path) -> None:
    """Remove the (empty) groups left by servers that are gone."""
    with contextlib.suppress(OSError):
        for base in parent.glob("planact-*-*"):
            pid = base.name.split("-")[1]
            if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
                for group in base.iterdir():
                    if group.is_dir():
                        with contextlib.suppress(OSError):
                            group.rmdir()
                with contextlib.suppress(OSError):
                    base.rmdir()


def _write(path: Path, value: str) -> None:
    with open(path, "w", encoding="ascii") as fh:
        fh.write(value)
