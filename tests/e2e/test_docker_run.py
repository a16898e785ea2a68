"""The core two-task run with RUNTIME=docker gives the same messages and files as local."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import docker
from backend.runtime.docker import LABEL_WORKSPACE, MIN_API_VERSION
from tests.agent.scripts import finish, plan_reply, run, write
from tests.e2e.cluster import Worker
from tests.e2e.server import Server, running_server, server_env, wait_for
from tests.fakellm import FakeModelServer
from tests.pg import postgres_url, reset
from tests.support.runtime import require_docker

pytestmark = [pytest.mark.e2e, pytest.mark.docker]

CODE = 'import sys\nprint("a < b & c", sys.version_info >= (3, 0))\n'


def script(fake: FakeModelServer) -> None:
    fake.script(
        {"stage": "planning", "content": plan_reply("Write", "Run")},
        {"stage": "thinking", "content": write("src/app.py", CODE) + finish("wrote it")},
        {
            "stage": "thinking",
            "content": run("python3 src/app.py > out.txt && cat out.txt && id -u")
            + finish("ran it"),
        },
        {"stage": "summary", "content": "Done."},
    )


def shape(messages: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """What must be equal between runtimes: order, kinds, statuses, paths, content
    (but the uid line the command prints, which differs on purpose)."""
    out = []
    for m in messages:
        content = m["content"]
        if m["meta"]["action_type"] == "terminal_run" and m["status"] != "running":
            content = content.splitlines()[:3]
        elif m["meta"]["action_type"] in ("plan", "task", "finish_summery"):
            content = [
                {k: v for k, v in item.items() if k not in ("id", "url")}
                for item in m["meta"]["json"]
            ]
        out.append(
            (m["role"], m["status"], m["meta"]["action_type"], m["meta"]["filepath"], str(content))
        )
    return out


def one_run(tmp: Path, fake: FakeModelServer, runtime: str) -> tuple[list[dict[str, Any]], Path]:
    script(fake)
    tmp.mkdir()
    with running_server(tmp, fake.base_url, RUNTIME=runtime) as server:
        messages, end, headers = server.run({"goal": "write code", "runtime": runtime})
        assert end["status"] == "completed", messages[-3:]
    ws = tmp / "workspace" / "user_1" / f"Conversation_{headers['x-conversation-id']}"
    return messages, ws


def test_docker_run_matches_local(tmp_path: Path, fake_model: FakeModelServer) -> None:
    require_docker()
    local, local_ws = one_run(tmp_path / "local", fake_model, "local")
    docker, docker_ws = one_run(tmp_path / "docker", fake_model, "docker")
    assert shape(docker) == shape(local)
    for rel in ("src/app.py", "out.txt"):
        assert (docker_ws / rel).read_bytes() == (local_ws / rel).read_bytes()
    assert (docker_ws / "out.txt").read_text() == "a < b & c True\n"
    result = next(
        m for m in docker if m["meta"]["action_type"] == "terminal_run" and m["status"] == "success"
    )
    assert result["content"].splitlines()[3] != "0"  # not root inside the sandbox
    assert (docker_ws / "out.txt").stat().st_uid == docker_ws.stat().st_uid


def test_deleting_a_conversation_removes_the_queue_workers_sandbox(
    tmp_path: Path, fake_model: FakeModelServer
) -> None:
    """The worker that ran the commands keeps the sandbox (SANDBOX_IDLE_TIMEOUT); a DELETE on
    the API server, another process, removes it at once, not at the idle timeout."""
    require_docker()
    url = postgres_url()
    reset(url)
    env = server_env(tmp_path, fake_model.base_url, DATABASE_URL=url, EXECUTOR="queue")
    env |= {"RUNTIME": "docker", "SANDBOX_IDLE_TIMEOUT": "3600"}
    # the API replica has no Docker engine: only the worker runs commands
    server = Server(tmp_path, env | {"DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"}).start()
    worker = Worker(tmp_path, env, "w").start()
    client = docker.DockerClient.from_env(version=MIN_API_VERSION, timeout=30)
    try:
        script(fake_model)
        messages, end, headers = server.run({"goal": "write code", "runtime": "docker"})
        assert end["status"] == "completed", messages[-3:]
        cid = headers["x-conversation-id"]
        ws = (tmp_path / "workspace" / "user_1" / f"Conversation_{cid}").resolve()

        def sandboxes() -> list[Any]:
            return list(
                client.containers.list(
                    all=True, filters={"label": f"{LABEL_WORKSPACE}={ws}"}, ignore_removed=True
                )
            )

        assert len(sandboxes()) == 1  # kept by the worker for the next run
        with server.client() as c:
            assert c.delete(f"/api/conversations/{cid}").status_code == 200
        wait_for(lambda: not sandboxes(), timeout=30, what="the worker's sandbox to go")
        assert not ws.exists()
    finally:
        worker.stop()
        server.stop()
        client.close()


def test_files_uploaded_between_runs_can_be_changed_by_the_sandbox(
    tmp_path: Path, fake_model: FakeModelServer
) -> None:
    """The server writes uploads; the sandbox user must be able to change them and add files
    next to them, also when the workspace was handed to that user by an earlier run."""
    require_docker()
    with running_server(tmp_path, fake_model.base_url, RUNTIME="docker") as server:
        fake_model.script(
            {"stage": "planning", "content": plan_reply("Look")},
            {"stage": "thinking", "content": run("ls") + finish("looked")},
            {"stage": "summary", "content": "Done."},
        )
        messages, end, headers = server.run({"goal": "look around", "runtime": "docker"})
        assert end["status"] == "completed", messages[-3:]
        cid = headers["x-conversation-id"]
        with server.client() as c:
            up = c.post(
                f"/api/conversations/{cid}/files",
                files=[("file", ("data.csv", b"a,b\n1,2\n", "text/csv"))],
                data={"dir": "inputs/2026"},
            )
            assert up.status_code == 201, up.text
        command = (
            "echo 3,4 >> inputs/2026/data.csv && touch inputs/2026/notes.txt "
            "&& cat inputs/2026/data.csv"
        )
        fake_model.script(
            {"stage": "planning", "content": plan_reply("Append")},
            {"stage": "thinking", "content": run(command) + finish("appended")},
            {"stage": "summary", "content": "Done."},
        )
        messages, end, _ = server.run(
            {"goal": "append a row", "runtime": "docker", "conversation_id": cid}
        )
        assert end["status"] == "completed", messages[-3:]
        result = next(
            m
            for m in messages
            if m["meta"]["action_type"] == "terminal_run" and m["status"] != "running"
        )
        assert result["status"] == "success", result["content"]
        ws = tmp_path / "workspace" / "user_1" / f"Conversation_{cid}"
        assert (ws / "inputs/2026/data.csv").read_bytes() == b"a,b\n1,2\n3,4\n"
        assert (ws / "inputs/2026/notes.txt").exists()
