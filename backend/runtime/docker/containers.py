"""The sandbox container: how one is made (locked down), named, labelled, found, removed.

Calls block (docker SDK): callers run them on a worker thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import docker.errors
from docker.client import DockerClient
from docker.types import Mount, Ulimit

from backend.runtime.base import RuntimeUnavailable
from backend.runtime.docker.engine import API_ERRORS, remove_container
from backend.runtime.docker.ownership import host_path
from backend.runtime.limits import SandboxLimits

if TYPE_CHECKING:
    from backend.config import Settings

LABEL = "planact.sandbox"
LABEL_ROOT = "planact.root"
LABEL_WORKSPACE = "planact.workspace"
LABEL_OWNER = "planact.owner"
SANDBOX_DIR = "/workspace"
KILL_GRACE = 15.0  # seconds past the timeout before the server kills a command itself
NOBODY = 65534

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


def workdir(cwd: str) -> str:
    """The folder in the sandbox of ``cwd`` (workspace-relative)."""
    return SANDBOX_DIR if cwd == "." else f"{SANDBOX_DIR}/{cwd}"


class SandboxRunner(Protocol):
    """What a sandbox keeps of its command runner (:class:`.runner.Runner`)."""

    alive: bool
    thread: threading.Thread

    def close(self) -> None: ...


@dataclass
class Sandbox:
    """One conversation workspace's container, as the runtime uses it."""

    key: str  # the workspace's real path
    container_id: str
    user: str  # "uid:gid" commands run as
    last_used: float = field(default_factory=time.monotonic)
    busy: int = 0
    runner: SandboxRunner | None = None
    no_runner: bool = False  # the image cannot run the runner (no python3): exec per command
    had_runner: bool = False  # a runner started here once: a runner that cannot start now
    # means a broken sandbox (replaced), not an image without python3
    runner_lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class Containers:
    """The sandbox containers of one runtime: this deployment's (``LABEL_ROOT``, the
    workspace as the engine sees it) and this process's (``LABEL_OWNER``)."""

    def __init__(self, settings: Settings, owner: str) -> None:
        self.settings = settings
        self.owner = owner
        self.image = settings.sandbox_image
        self.root = os.path.realpath(settings.workspace_dir)
        # what tells this deployment's sandboxes apart on a shared engine: the workspace as
        # the engine sees it (in a container WORKSPACE_DIR alone is the same everywhere)
        self.deployment = str(settings.sandbox_host_workspace_dir or self.root)
        self._engine_cpus: int | None = None

    def create(self, client: DockerClient, key: str, owner: tuple[int, int]) -> Sandbox:
        try:
            client.images.get(self.image)
        except docker.errors.ImageNotFound:
            raise RuntimeUnavailable(
                f"the sandbox image {self.image!r} does not exist. Build it with "
                "`make sandbox-image` (see docs/docker.md), or set RUNTIME=local."
            ) from None
        name = self.name(key)
        with contextlib.suppress(docker.errors.NotFound):
            remove_container(client, name)  # ours, left by a cancelled start or forgotten
        # the container's own processes (init, sleep) run as another uid, so that a command
        # killing every process it may (kill -9 -1) cannot stop the container
        keeper = NOBODY if owner[0] != NOBODY else NOBODY - 1
        limits = self.limits
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
                LABEL_ROOT: self.deployment,
                LABEL_OWNER: self.owner,
                LABEL_WORKSPACE: key,
            },
            mounts=[Mount(SANDBOX_DIR, host_path(self.settings, self.root, key), type="bind")],
            network_mode=self.settings.sandbox_network,
            mem_limit=limits.memory,
            memswap_limit=limits.memory,
            nano_cpus=int(self.cpus(client) * 1e9),
            pids_limit=limits.pids,
            # no file may grow past the workspace budget (the rest is watched while a
            # command runs: backend/runtime/limits/budget.py)
            ulimits=[Ulimit(name="fsize", soft=limits.workspace, hard=limits.workspace)],
            security_opt=["no-new-privileges"],
            cap_drop=["ALL"],
            read_only=True,
            tmpfs={"/tmp": f"rw,exec,nosuid,nodev,mode=1777,size={self.tmp_size}"},
        )
        return Sandbox(key=key, container_id=str(container.id), user=f"{owner[0]}:{owner[1]}")

    def name(self, key: str) -> str:
        """Unique per deployment, owner and conversation workspace."""
        ident = f"{self.deployment}\0{self.owner}\0{key}"
        return "planact-sbx-" + hashlib.sha256(ident.encode()).hexdigest()[:20]

    @property
    def limits(self) -> SandboxLimits:
        try:
            return SandboxLimits.from_settings(self.settings)
        except ValueError as exc:
            raise RuntimeUnavailable(str(exc)) from None

    @property
    def tmp_size(self) -> int:
        """Bytes of the sandbox's tmpfs /tmp (its pages count against the memory limit)."""
        return self.limits.tmp

    def cpus(self, client: DockerClient) -> float:
        """SANDBOX_CPUS, at most the engine's CPU count (the engine refuses more)."""
        if self._engine_cpus is None:
            try:
                self._engine_cpus = int(client.info().get("NCPU") or 0)
            except API_ERRORS:
                self._engine_cpus = 0
        wanted = self.settings.sandbox_cpus
        return min(wanted, self._engine_cpus) if self._engine_cpus else wanted

    def listed(self, client: DockerClient, **labels: str) -> list[Any]:
        """This deployment's sandbox containers (with these labels too)."""
        wanted = [f"{LABEL}=1", f"{LABEL_ROOT}={self.deployment}"]
        wanted += [f"{k}={v}" for k, v in labels.items()]
        return list(client.api.containers(all=True, filters={"label": wanted}))

    def remove_orphans(self, client: DockerClient, keep: set[str]) -> int:
        """Remove sandboxes of this deployment left under our owner id or with none (but
        those in ``keep``); how many."""
        removed = 0
        for info in self.listed(client):
            owner = (info.get("Labels") or {}).get(LABEL_OWNER)
            if info["Id"] not in keep and owner in (None, self.owner):
                with contextlib.suppress(docker.errors.NotFound):
                    remove_container(client, info["Id"])
                    removed += 1
        return removed

    def remove_workspace(self, client: DockerClient, key: str, also: str | None) -> None:
        """Remove the sandboxes of the workspace ``key`` (and the container ``also``)."""
        ids = {info["Id"] for info in self.listed(client, **{LABEL_WORKSPACE: key})}
        if also is not None:
            ids.add(also)
        for container_id in ids:
            with contextlib.suppress(docker.errors.NotFound):
                remove_container(client, container_id)

    @staticmethod
    def remove_owners(client: DockerClient, owners: set[str]) -> int:
        """Remove the sandboxes of the given owner ids, whatever their deployment."""
        removed = 0
        for owner in sorted(owners):
            filters = {"label": [f"{LABEL}=1", f"{LABEL_OWNER}={owner}"]}
            for info in client.api.containers(all=True, filters=filters):
                with contextlib.suppress(docker.errors.NotFound):
                    remove_container(client, info["Id"])
                    removed += 1
        return removed

    def owned(self, client: DockerClient) -> set[str]:
        """Ids of every sandbox of this process (any deployment label)."""
        filters = {"label": [f"{LABEL}=1", f"{LABEL_OWNER}={self.owner}"]}
        return {info["Id"] for info in client.api.containers(all=True, filters=filters)}
