"""Per-conversation control groups for the local runtime's sandbox (memory, processes, CPU).

Where the machine lets the server make child groups of its own (cgroup v1 controllers
mounted writable at ``/sys/fs/cgroup/<controller>``, as for a root server on a v1 or hybrid
host), each conversation's commands run in ``<server's group>/planact-<pid>-<n>/<conversation>``
of the ``memory``, ``pids`` and ``cpu`` controllers, capped at ``SANDBOX_MEMORY_MB`` (swap
included), ``SANDBOX_PIDS`` and ``SANDBOX_CPUS``. Commands of one conversation share one
group, so the caps hold for all of them together. The reaper (:mod:`backend.runtime.reaper`)
puts the sandbox into the group before bubblewrap starts; the groups are removed when the
runtime closes or the conversation is forgotten.

A unified (v2) hierarchy delegates only what its manager hands over (a leaf group whose
``cgroup.subtree_control`` the server may write, with no process of its own): not
attempted; such a host gets the rlimit fallback (docs/security.md).
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
_serial = itertools.count(1)  # one parent group per runtime of this process


def own_paths(proc_cgroup: str = "/proc/self/cgroup") -> dict[str, str]:
    """controller -> this process's group in it (v1 lines ``N:a,b:/path``)."""
    found: dict[str, str] = {}
    with open(proc_cgroup, encoding="utf-8") as fh:
        for line in fh:
            _num, names, path = line.rstrip("\n").split(":", 2)
            for name in names.split(","):
                if name:
                    found[name] = path
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
        if (root / "cgroup.controllers").exists():
            return "a unified (v2) cgroup hierarchy: delegated groups are not used"
        try:
            own = own_paths(proc_cgroup)
        except OSError as exc:
            return f"cannot read /proc/self/cgroup: {exc}"
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
            memory = str(self.limits.memory)
            _write(groups["memory"] / "memory.limit_in_bytes", memory)
            if (groups["memory"] / "memory.memsw.limit_in_bytes").exists():
                _write(groups["memory"] / "memory.memsw.limit_in_bytes", memory)
            _write(groups["pids"] / "pids.max", str(self.limits.pids))
            _write(groups["cpu"] / "cpu.cfs_period_us", str(CPU_PERIOD))
            _write(groups["cpu"] / "cpu.cfs_quota_us", str(int(self.limits.cpus * CPU_PERIOD)))
            self.made.add(key)
        return [str(group / "cgroup.procs") for group in groups.values()]

    def oom_kills(self, workspace: Path | str) -> int:
        """How many processes the memory cap has killed in the conversation's group."""
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
