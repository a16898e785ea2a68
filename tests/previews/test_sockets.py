"""A forwarder's socket in a folder the sandbox can write is reached only as itself: a
symlink swapped in (for the socket or a folder above it) or another kind of file is
refused, never followed to a socket of the host."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from backend.previews.sockets import fd_path, open_socket, remove_dir, socket_dir_beneath


@pytest.fixture
def host_socket(tmp_path: Path) -> Iterator[Path]:
    """A socket of the host's, outside the workspace (think /var/run/docker.sock)."""
    path = tmp_path / "host" / "secret.sock"
    path.parent.mkdir()
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen()
    yield path
    server.close()


def test_the_forwarders_socket_is_reached(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    folder = socket_dir_beneath(workspace)
    assert folder.parent == workspace / ".preview" and oct(folder.stat().st_mode)[-3:] == "777"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(folder / "s"))
    server.listen()
    fd = open_socket(str(folder / "s"), str(workspace))
    try:
        with socket.socket(socket.AF_UNIX) as client:
            client.connect(fd_path(fd))
    finally:
        os.close(fd)
        server.close()
    remove_dir(folder, str(workspace))
    assert not folder.exists()


def test_a_symlinked_socket_is_refused(tmp_path: Path, host_socket: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    folder = socket_dir_beneath(workspace)
    (folder / "s").symlink_to(host_socket)
    with pytest.raises(OSError):
        open_socket(str(folder / "s"), str(workspace))


def test_a_symlinked_folder_above_the_socket_is_refused(tmp_path: Path, host_socket: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / ".preview").symlink_to(host_socket.parent)
    with pytest.raises(OSError):
        open_socket(str(workspace / ".preview" / "secret.sock"), str(workspace))
    with pytest.raises(OSError):  # nor is a socket folder made through it
        socket_dir_beneath(workspace)
    assert os.listdir(host_socket.parent) == ["secret.sock"]


def test_a_file_that_is_not_a_socket_is_refused(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    folder = workspace / ".preview" / "x"
    folder.mkdir(parents=True)
    (folder / "s").write_text("not a socket")
    with pytest.raises(OSError):
        open_socket(str(folder / "s"), str(workspace))
