"""The Docker engine: one client, made on first use, and what its errors mean."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from typing import Any

import anyio
import docker.errors
import requests
from docker.client import DockerClient
from docker.constants import DEFAULT_DOCKER_API_VERSION
from docker.utils import version_lt

from backend.runtime.base import RuntimeUnavailable

MIN_API_VERSION = "1.25"  # init, pids_limit, mounts
API_ERRORS = (docker.errors.DockerException, requests.RequestException, OSError)


class ContainerGone(Exception):
    """The sandbox container is not there or not running (start a fresh one)."""


class Engine:
    """The docker client of one runtime: connected on first use (off the event loop),
    closed once."""

    def __init__(self, base_url: str | None = None) -> None:
        self.base_url = base_url
        self.current: DockerClient | None = None  # None: never connected, or closed
        self._lock = asyncio.Lock()

    async def client(self) -> DockerClient:
        if self.current is not None:
            return self.current
        async with self._lock:
            if self.current is None:
                try:
                    self.current = await anyio.to_thread.run_sync(self._connect)
                except API_ERRORS as exc:
                    where = self.base_url or os.environ.get("DOCKER_HOST") or "the default socket"
                    raise RuntimeUnavailable(
                        f"no Docker engine answers at {where} ({short(exc)}). Start Docker, "
                        "or set RUNTIME=local."
                    ) from exc
            return self.current

    def take(self) -> DockerClient | None:
        """The client, now no longer this engine's (the caller closes it)."""
        client, self.current = self.current, None
        return client

    def _make(self, version: str, timeout: int) -> DockerClient:
        if self.base_url:
            return DockerClient(base_url=self.base_url, version=version, timeout=timeout)
        return DockerClient.from_env(version=version, timeout=timeout)

    def _connect(self) -> DockerClient:
        probe_unix_socket(self.base_url or os.environ.get("DOCKER_HOST"))
        # an explicit version: "auto" asks the engine inside the constructor and leaks the
        # connection when that fails
        probe = self._make(MIN_API_VERSION, 10)
        try:
            server = str(probe.version()["ApiVersion"])
        finally:
            probe.close()
        if version_lt(DEFAULT_DOCKER_API_VERSION, server):
            server = DEFAULT_DOCKER_API_VERSION
        return self._make(server, 60)


def is_gone(exc: Exception) -> bool:
    """The engine's way of saying the container is not there or not running: 404, 409, or
    a 500 "is not running" when it stopped between creating and starting an exec."""
    if isinstance(exc, docker.errors.NotFound):
        return True
    if not isinstance(exc, docker.errors.APIError):
        return False
    return exc.status_code == 409 or "is not running" in str(exc.explanation or exc)


REMOVAL_WAIT = 60  # seconds a removal waits for one already under way


def remove_container(client: DockerClient, container_id: str) -> None:
    """Remove the container, and return once it is gone: when another removal of it is
    already under way (the engine answers 409), wait for that one rather than fail; a name
    is free again only once its container is gone."""
    try:
        client.api.remove_container(container_id, force=True, v=True)
    except docker.errors.APIError as exc:
        if exc.status_code != 409 or "already in progress" not in str(exc.explanation):
            raise
        with contextlib.suppress(docker.errors.NotFound):
            client.api.wait(container_id, timeout=REMOVAL_WAIT, condition="removed")


def close_stream(stream: Any) -> None:
    """Close an exec stream: shut its socket down (unblocks a reader) and the response."""
    with contextlib.suppress(Exception):
        stream.close()
    with contextlib.suppress(Exception):
        stream._response.close()


def probe_unix_socket(url: str | None) -> None:
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


def short(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text if len(text) <= 200 else text[:200] + "…"
