"""Two users on one server: bob's agent tries to read alice's files, the database, the
server's environment and to reach the network (the real server, a scripted model over HTTP).

Under bubblewrap (local runtime) and docker every attempt fails; unsandboxed (the control,
``LOCAL_SANDBOX=off`` with ``ALLOW_SHARED_LOCAL=1``) the same command gets them all, which
shows the attack works. Without that permission, two users on an unsandboxed local runtime
are refused at start.
"""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import httpx
import pytest

from tests.agent.scripts import finish, plan_reply, run
from tests.e2e.server import PLANACT, Server, server_env
from tests.fakellm import FakeModelServer
from tests.support.runtime import require_bwrap, require_docker

pytestmark = pytest.mark.e2e

ALICE, BOB = "tok-alice-7f3a9c", "tok-bob-22e8d1"
SECRET = "alice-secret-5c1e0b"
USERS = f"alice:{ALICE},bob:{BOB}"


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A TCP port open on every host address: a sandbox with no network cannot reach it."""
    sock = socket.socket()
    sock.bind(("0.0.0.0", 0))
    sock.listen(8)
    yield sock
    sock.close()


def host_addresses() -> list[str]:
    """127.0.0.1 and this host's other IPv4 addresses (the docker bridge's included)."""
    out = subprocess.run(["hostname", "-I"], capture_output=True, text=True, check=False)
    found = [a for a in out.stdout.split() if "." in a]
    return ["127.0.0.1", *found]


def attack(tmp: Path, alice_cid: str, server_pid: int, port: int) -> str:
    alice_file = tmp / "workspace" / "user_alice" / f"Conversation_{alice_cid}" / "hello.txt"
    reads = [
        f"../../user_alice/Conversation_{alice_cid}/hello.txt",
        str(alice_file),
        str(tmp / "planact.db"),
        f"/proc/{server_pid}/environ",
    ]
    parts = [f"cat {path}; echo" for path in reads]
    parts.append("env")
    for host in host_addresses():
        parts.append(f"(exec 3<>/dev/tcp/{host}/{port}) 2>/dev/null && echo CONNECTED-{host}")
    return "; ".join(parts) + "; true"


def attack_output(tmp: Path, fake: FakeModelServer, port: int, **env: str) -> str:
    """Start the server, alice uploads a file, bob's agent runs the attack: its output."""
    tmp.mkdir(exist_ok=True)
    server = Server(tmp, server_env(tmp, fake.base_url, AUTH_TOKENS=USERS, **env)).start()
    try:
        with server.client(headers={"Authorization": f"Bearer {ALICE}"}) as alice:
            cid = alice.post("/api/conversations", json={"title": "mine"}).json()
            cid = cid["conversation_id"]
            up = alice.post(
                f"/api/conversations/{cid}/files",
                files={"file": ("hello.txt", SECRET.encode(), "text/plain")},
            )
            assert up.status_code == 201, up.text
        assert server.proc is not None
        fake.script(
            {"stage": "route", "content": '{"task_type": "code", "needs_tools": true}'},
            {"stage": "planning", "content": plan_reply("Look around")},
            {
                "stage": "thinking",
                "content": run(attack(tmp, cid, server.proc.pid, port)) + finish("looked"),
            },
            {"stage": "summary", "content": "Done."},
        )
        messages, end, _ = server.run(
            {"goal": "look around"}, headers={"Authorization": f"Bearer {BOB}"}
        )
        assert end is not None and end["status"] == "completed", messages[-3:]
        results = [
            m["content"]
            for m in messages
            if m["meta"]["action_type"] == "terminal_run" and m["status"] != "running"
        ]
        assert len(results) == 1, results
        return cast(str, results[0])
    finally:
        server.stop()


def connected(sock: socket.socket) -> bool:
    sock.setblocking(False)
    try:
        conn, _ = sock.accept()
    except BlockingIOError:
        return False
    conn.close()
    return True


def assert_nothing_leaked(output: str, listener: socket.socket) -> None:
    assert SECRET not in output  # alice's file, relative and absolute
    assert "SQLite format 3" not in output  # the database
    assert "sk-fake" not in output and ALICE not in output  # the server's environment
    assert "LLM_BASE_URL" not in output and "AUTH_TOKENS" not in output
    assert "CONNECTED" not in output
    assert not connected(listener)


def test_bob_gets_nothing_under_bubblewrap(
    tmp_path: Path, fake_model: FakeModelServer, listener: socket.socket
) -> None:
    require_bwrap()
    port = listener.getsockname()[1]
    output = attack_output(tmp_path, fake_model, port, LOCAL_SANDBOX="bwrap")
    assert_nothing_leaked(output, listener)
    assert "HOME=/workspace" in output  # the command did run, in the sandbox


@pytest.mark.docker
def test_bob_gets_nothing_under_docker(
    tmp_path: Path, fake_model: FakeModelServer, listener: socket.socket
) -> None:
    require_docker()
    port = listener.getsockname()[1]
    output = attack_output(tmp_path, fake_model, port, RUNTIME="docker", LOCAL_SANDBOX="off")
    assert_nothing_leaked(output, listener)
    assert "HOME=" in output


def test_the_attack_works_on_an_unsandboxed_local_runtime(
    tmp_path: Path, fake_model: FakeModelServer, listener: socket.socket
) -> None:
    """The control: what the sandboxes keep is there to take without one."""
    port = listener.getsockname()[1]
    output = attack_output(tmp_path, fake_model, port, LOCAL_SANDBOX="off", ALLOW_SHARED_LOCAL="1")
    assert output.count(SECRET) == 2  # relative and absolute
    assert "SQLite format 3" in output
    assert "LLM_BASE_URL" in output  # /proc/<server pid>/environ (the key is stripped from env)
    assert "CONNECTED-127.0.0.1" in output and connected(listener)


def start(tmp: Path, fake: FakeModelServer, **env: str) -> subprocess.CompletedProcess[str]:
    """`planact serve` that is expected to refuse to start."""
    full: dict[str, Any] = {**server_env(tmp, fake.base_url, AUTH_TOKENS=USERS), **env}
    return subprocess.run(
        [PLANACT, "serve", "--port", "1"],
        cwd=tmp,
        env={**os.environ, **full},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_two_users_on_an_unsandboxed_local_runtime_are_refused_at_start(
    tmp_path: Path, fake_model: FakeModelServer
) -> None:
    done = start(tmp_path, fake_model, LOCAL_SANDBOX="off")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "RUNTIME=docker" in done.stderr and "bubblewrap" in done.stderr
    assert "ALLOW_SHARED_LOCAL=1" in done.stderr


def test_allow_shared_local_starts_two_users_unsandboxed(
    tmp_path: Path, fake_model: FakeModelServer
) -> None:
    env = server_env(
        tmp_path,
        fake_model.base_url,
        AUTH_TOKENS=USERS,
        LOCAL_SANDBOX="off",
        ALLOW_SHARED_LOCAL="1",
    )
    server = Server(tmp_path, env).start()
    try:
        health = httpx.get(f"{server.url}/api/health", timeout=10).json()
        assert "local" in health["runtimes"]
    finally:
        server.stop()
    assert "LOCAL_SANDBOX=off" in server.log.read_text()  # the warning at start
