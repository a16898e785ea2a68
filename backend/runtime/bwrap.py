"""Bubblewrap around the local runtime's commands (``LOCAL_SANDBOX``, docs/security.md).

A command runs as ``bwrap OPTIONS -- bash -c COMMAND`` under the local runtime's reaper
(:mod:`backend.runtime.reaper`), which stays outside the sandbox. Inside:

- new user, PID, IPC, UTS (and cgroup) namespaces; no network namespace is shared unless
  ``SANDBOX_NETWORK=bridge`` (or ``1``); every capability dropped; a new session;
- the system read-only and nothing else of the host: ``/usr`` and its ``/bin``, ``/sbin``,
  ``/lib*`` links, and ``/etc`` without its entries that other users may not read
  (``/etc/shadow``, private keys: hidden, so that a server running as root does not hand
  them to its commands); no ``/home``, ``/root``, ``/var``, ``/run``, ``/opt``, no
  repository, no data directory, no other workspace;
- the conversation's workspace, the only writable host folder, at ``/workspace`` (also
  ``HOME``), a private ``/tmp`` (a tmpfs of ``SANDBOX_TMP_MB``), a fresh, read-only
  ``/proc`` that shows the sandbox's processes only, a minimal ``/dev``; the environment
  is the few variables of :meth:`Bubblewrap.env`.

``--die-with-parent`` ties the sandbox to the reaper; the PID namespace's first process is
bwrap's own init, and when it dies the kernel kills every process left in the namespace.
"""

from __future__ import annotations

import functools
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

INSTALL_HINT = "apt-get install bubblewrap"
SANDBOX_WORKSPACE = "/workspace"
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# top-level system folders bound read-only (or recreated as links on merged-/usr systems)
SYSTEM_DIRS = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32")
PROBE_TIMEOUT = 20.0  # seconds the start-up probe may take (a loaded machine)


@functools.lru_cache(maxsize=4)
def hidden_entries(root: str = "/etc") -> tuple[str, ...]:
    """Entries under ``root`` that other users may not read: files without ``o+r``,
    folders without ``o+rx`` (not descended into). Listed once per process."""
    found: list[str] = []
    for top, dirs, files in os.walk(root, onerror=lambda _exc: None):
        for name in list(dirs):
            path = os.path.join(top, name)
            try:
                mode = os.lstat(path).st_mode
            except OSError:
                continue
            if stat.S_ISDIR(mode) and mode & 0o005 != 0o005:
                found.append(path)
                dirs.remove(name)
        for name in files:
            path = os.path.join(top, name)
            try:
                mode = os.lstat(path).st_mode
            except OSError:
                continue
            if stat.S_ISREG(mode) and not mode & stat.S_IROTH:
                found.append(path)
    return tuple(sorted(found))


def _system_binds() -> list[str]:
    args: list[str] = []
    for name in SYSTEM_DIRS:
        path = f"/{name}"
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    return args


@dataclass(frozen=True)
class Bubblewrap:
    """How to run one command in a bubblewrap sandbox."""

    path: str  # the bwrap executable
    network: bool = False  # share the host's network (SANDBOX_NETWORK=bridge)
    tmp_size: int | None = None  # bytes of the private /tmp (SANDBOX_TMP_MB); None: no cap
    hidden: tuple[str, ...] = field(default_factory=hidden_entries)

    def argv(self, workspace: Path, cwd: str = ".") -> list[str]:
        """bwrap and its options, up to ``--``: the command follows."""
        inner = os.path.normpath(os.path.join(SANDBOX_WORKSPACE, cwd))
        args = [
            self.path,
            "--unshare-user",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--hostname",
            "sandbox",
            "--die-with-parent",
            "--new-session",
            "--cap-drop",
            "ALL",
            *_system_binds(),
            "--ro-bind",
            "/etc",
            "/etc",
            *_hide(self.hidden),
            "--proc",
            "/proc",
            # read-only: a root server's command is root (mapped to the host's root) without
            # capabilities, and global sysctls (/proc/sys) check only the owner's write bit
            "--remount-ro",
            "/proc",
            "--dev",
            "/dev",
            *(["--size", str(self.tmp_size)] if self.tmp_size else []),
            "--tmpfs",
            "/tmp",
            "--bind",
            str(workspace),
            SANDBOX_WORKSPACE,
            "--chdir",
            inner,
        ]
        if not self.network:
            args.insert(1, "--unshare-net")
        else:
            args += _resolver_binds()
        return [*args, "--"]

    def env(self, cwd: str = ".") -> dict[str, str]:
        """The command's whole environment: nothing of the server's."""
        return {
            "PATH": PATH,
            "HOME": SANDBOX_WORKSPACE,
            "PWD": os.path.normpath(os.path.join(SANDBOX_WORKSPACE, cwd)),
            "LANG": "C.UTF-8",
            "TMPDIR": "/tmp",
        }

    def probe(self) -> str | None:
        """Run a trivial command in the sandbox: None when it works, else why not."""
        with tempfile.TemporaryDirectory(prefix="planact-bwrap-probe-") as tmp:
            argv = [*self.argv(Path(tmp)), "bash", "-c", "echo ok > probe"]
            try:
                done = subprocess.run(
                    argv,
                    env=self.env(),
                    stdin=subprocess.DEVNULL,
                    capture_output=True,
                    timeout=PROBE_TIMEOUT,
                    check=False,
                )
            except (OSError, subprocess.TimeoutExpired) as exc:
                return str(exc)
            if done.returncode != 0 or (Path(tmp) / "probe").read_bytes() != b"ok\n":
                text = done.stderr.decode("utf-8", "replace").strip()
                return text or f"bwrap exited with status {done.returncode}"
        return None


def _hide(paths: Iterable[str]) -> list[str]:
    args: list[str] = []
    for path in paths:
        if os.path.isdir(path) and not os.path.islink(path):
            args += ["--tmpfs", path]
        else:
            args += ["--ro-bind", "/dev/null", path]
    return args


def _resolver_binds() -> list[str]:
    """With the network on: where /etc/resolv.conf leads when it is a link out of /etc
    (systemd-resolved's /run/systemd/resolve/…), bound read-only so that names resolve."""
    conf = "/etc/resolv.conf"
    target = os.path.realpath(conf)
    if not os.path.islink(conf) or target.startswith("/etc/") or not os.path.isfile(target):
        return []
    return ["--ro-bind", target, target]


def find_bwrap() -> str | None:
    return shutil.which("bwrap")
