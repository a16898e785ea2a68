"""What only the docker runtime promises: isolation, limits and the container lifecycle."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path
from typing import Any

import docker.errors
import pytest

from backend.runtime.docker import LABEL_OWNER, LABEL_WORKSPACE, DockerRuntime
from backend.runtime.docker.engine import remove_container
from tests.support.runtime import (
    SANDBOX_IMAGE,
    eventually,
    read,
    require_docker,
    run,
    runtime_settings,
    stdout_of,
    wait_for_file,
    write,
)


@pytest.fixture(params=["runner", "exec"])
async def make_docker(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """Docker runtimes with the sandbox's command runner, or one docker exec per command."""
    require_docker()
    made: list[DockerRuntime] = []

    def factory(owner: str | None = None, **overrides: Any) -> DockerRuntime:
        rt = DockerRuntime(
            runtime_settings(tmp_path, **overrides),
            runner=request.param == "runner",
            owner=owner,
        )
        made.append(rt)
        return rt

    yield factory
    for rt in made:
        await rt.close()


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "workspace" / "user_1" / "Conversation_1"
    ws.mkdir(parents=True)
    return ws


def containers(client: Any, workspace: Path) -> list[Any]:
    key = os.path.realpath(workspace)
    # ignore_removed: one the reaper removes between docker-py's list and inspect is gone
    found = client.containers.list(
        all=True, filters={"label": f"{LABEL_WORKSPACE}={key}"}, ignore_removed=True
    )
    return list(found)


pytestmark = pytest.mark.docker


async def test_runs_as_the_workspace_owner_not_root(
    make_docker: Any, workspace: Path, docker_client: Any
) -> None:
    os.chown(workspace, 4321, 4322)
    rt = make_docker()
    result = await run(rt, workspace, "id -u; id -g; touch made-by-command; mkdir dir")
    assert stdout_of(result) == "4321\n4322\n"
    for name in ("made-by-command", "dir"):
        st = (workspace / name).stat()
        assert (st.st_uid, st.st_gid) == (4321, 4322)
    await write(rt, workspace, "deep/host.txt", "x")
    if os.geteuid() == 0:
        for rel in ("deep", "deep/host.txt"):
            st = (workspace / rel).stat()
            assert (st.st_uid, st.st_gid) == (4321, 4322)
    assert (await run(rt, workspace, "echo y >> deep/host.txt")).ok
    attrs = docker_client.containers.get(containers(docker_client, workspace)[0].id).attrs
    host = attrs["HostConfig"]
    assert host["NetworkMode"] == "none"
    assert host["ReadonlyRootfs"] is True
    assert host["CapDrop"] == ["ALL"]
    assert host["SecurityOpt"] == ["no-new-privileges"]
    assert host["PidsLimit"] == 128
    assert host["Memory"] == 512 * 1024 * 1024
    assert host["NanoCpus"] == 1_000_000_000
    greedy = make_docker(sandbox_cpus=4096.0)
    assert (await run(greedy, workspace.parent / "Conversation_2", "true")).ok


@pytest.mark.skipif(os.geteuid() != 0, reason="handing a root-owned workspace over needs root")
async def test_root_owned_workspace_is_handed_to_a_non_root_user(
    make_docker: Any, workspace: Path
) -> None:
    os.chown(workspace, 0, 0)
    (workspace / "old.txt").write_text("from before")
    rt = make_docker()
    result = await run(rt, workspace, "id -u; echo more >> old.txt; touch new.txt")
    assert result.ok, result.content
    assert stdout_of(result) == "1000\n"
    assert workspace.stat().st_uid == 1000
    assert (workspace / "new.txt").stat().st_uid == 1000
    assert (workspace / "old.txt").read_text() == "from beforemore\n"


async def test_uid_override(make_docker: Any, workspace: Path) -> None:
    rt = make_docker(sandbox_uid=2345, sandbox_gid=2346)
    os.chmod(workspace, 0o777)
    assert stdout_of(await run(rt, workspace, "id -u; id -g")) == "2345\n2346\n"
    refused = make_docker(sandbox_uid=0)
    other = workspace.parent / "Conversation_2"
    result = await run(refused, other, "id -u")
    assert result.status == "failure"
    assert "root" in result.content


async def test_no_network_and_read_only_root(make_docker: Any, workspace: Path) -> None:
    rt = make_docker()
    net = await run(rt, workspace, "ls /sys/class/net")
    assert stdout_of(net) == "lo\n"
    connect = await run(
        rt,
        workspace,
        "python3 -c \"import socket; socket.create_connection(('192.0.2.1', 80), timeout=3)\"",
    )
    assert connect.status == "failure"
    assert "Network is unreachable" in connect.content
    root = await run(rt, workspace, "touch /usr/local/pwned")
    assert root.status == "failure"
    assert "Read-only file system" in root.content
    tmp = await run(rt, workspace, "echo ok > /tmp/t && cat /tmp/t && echo $HOME")
    assert stdout_of(tmp) == "ok\n/tmp\n"


async def test_tools_of_a_coding_agent(make_docker: Any, workspace: Path) -> None:
    rt = make_docker()
    await write(rt, workspace, "hello.c", '#include <stdio.h>\nint main(){puts("hi from C");}\n')
    built = await run(rt, workspace, "gcc -o hello hello.c && ./hello")
    assert stdout_of(built) == "hi from C\n", built.content
    git = await run(
        rt, workspace, "git init -q repo && cd repo && git commit -q --allow-empty -m x"
    )
    assert git.ok, git.content
    venv = await run(rt, workspace, "python3 -m venv /tmp/venv && /tmp/venv/bin/python -V")
    assert venv.ok, venv.content


async def test_allocation_above_the_memory_limit_is_killed_and_reported(
    make_docker: Any, workspace: Path
) -> None:
    rt = make_docker(sandbox_memory="128m")
    result = await run(
        rt, workspace, "python3 -c 'b = bytearray(400 * 1024 * 1024); print(len(b))'"
    )
    assert result.status == "failure"
    assert result.content.startswith("Exit code: 137\nkilled: out of memory")
    assert stdout_of(await run(rt, workspace, "echo still here")) == "still here\n"


async def test_fork_bomb_is_contained_and_the_container_survives(
    make_docker: Any, workspace: Path
) -> None:
    rt = make_docker(sandbox_pids=64, terminal_timeout=3)
    result = await run(rt, workspace, "bomb() { bomb | bomb & }; bomb; sleep 30")
    # the bomb hits the pids limit until the timeout kills the whole process group
    assert result.content.startswith("Command timed out after 3 seconds")

    async def usable() -> bool:
        return stdout_of(await run(rt, workspace, "echo alive")) == "alive\n"

    await eventually(usable, what="the sandbox to run commands again")
    count = await run(rt, workspace, "ps -e --no-headers | wc -l")
    assert int(stdout_of(count)) < 10


async def test_cancel_kills_the_command_inside_the_container(
    make_docker: Any, workspace: Path, docker_client: Any
) -> None:
    rt = make_docker()
    task = asyncio.create_task(run(rt, workspace, "echo $$ > pid; sleep 4242 & sleep 4343"))
    await wait_for_file(workspace / "pid")
    (container,) = containers(docker_client, workspace)

    def sleeping() -> bool:
        return any(
            "4242" in " ".join(p) or "4343" in " ".join(p) for p in container.top()["Processes"]
        )

    assert sleeping()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    async def gone() -> bool:
        return not await asyncio.to_thread(sleeping)

    await eventually(gone, what="the cancelled command to die in the container")


async def test_timeout_is_enforced_inside_the_container(
    make_docker: Any, workspace: Path, docker_client: Any
) -> None:
    rt = make_docker(terminal_timeout=1.5)
    result = await run(rt, workspace, "trap '' TERM; sleep 100")
    assert result.content.startswith("Command timed out after 1.5 seconds")
    (container,) = containers(docker_client, workspace)
    assert not any("sleep 100" in " ".join(p) for p in container.top()["Processes"])


async def test_idle_container_is_removed_and_restarted_on_demand(
    make_docker: Any, workspace: Path, docker_client: Any
) -> None:
    # long enough that a slow engine still lists the container before it goes idle
    rt = make_docker(sandbox_idle_timeout=3.0)
    await write(rt, workspace, "kept.txt", "kept")
    assert (await run(rt, workspace, "true")).ok
    assert len(containers(docker_client, workspace)) == 1

    async def removed() -> bool:
        return not await asyncio.to_thread(containers, docker_client, workspace)

    await eventually(removed, what="the idle container to be removed")
    again = await run(rt, workspace, "cat kept.txt")
    assert stdout_of(again) == "kept"


async def test_busy_container_is_not_reaped(
    make_docker: Any, workspace: Path, docker_client: Any
) -> None:
    rt = make_docker(sandbox_idle_timeout=0.3)
    result = await run(rt, workspace, "sleep 1.5; echo survived")
    assert stdout_of(result) == "survived\n"


async def test_forget_removes_the_conversation_container(
    make_docker: Any, workspace: Path, docker_client: Any
) -> None:
    rt = make_docker()
    other = workspace.parent / "Conversation_2"
    assert (await run(rt, workspace, "true")).ok
    assert (await run(rt, other, "true")).ok
    assert len(containers(docker_client, workspace)) == 1
    await rt.forget(workspace)
    assert containers(docker_client, workspace) == []
    assert len(containers(docker_client, other)) == 1
    assert (await run(rt, workspace, "echo back")).ok
    await rt.close()
    assert containers(docker_client, workspace) == []
    assert containers(docker_client, other) == []


async def test_owners_keep_each_others_sandboxes_and_dead_ones_are_reaped(
    make_docker: Any, workspace: Path, docker_client: Any
) -> None:
    first = make_docker()
    second = make_docker()
    assert first.owner != second.owner
    other = workspace.parent / "Conversation_2"
    assert (await run(first, workspace, "true")).ok
    assert (await run(second, workspace, "true")).ok  # same conversation, another owner
    assert (await run(second, other, "true")).ok
    names = {c.name for c in containers(docker_client, workspace)}
    assert len(names) == 2  # unique per owner and conversation
    owners = {c.labels[LABEL_OWNER] for c in containers(docker_client, workspace)}
    assert owners == {first.owner, second.owner}
    # starting a process never removes another live owner's sandboxes
    third = make_docker()
    await third.start()
    await second.start()
    assert len(containers(docker_client, workspace)) == 2
    assert (await run(first, workspace, "echo still here")).ok
    # the run lifecycle found second's lease expired: only its sandboxes go
    assert await third.reap_owners([second.owner, "no-such-owner", third.owner]) == 2
    assert [c.labels[LABEL_OWNER] for c in containers(docker_client, workspace)] == [first.owner]
    assert containers(docker_client, other) == []
    assert stdout_of(await run(first, workspace, "echo mine")) == "mine\n"
    assert await first.reap_owners([first.owner]) == 0  # never its own


async def test_start_removes_what_this_owner_left(
    make_docker: Any, workspace: Path, docker_client: Any
) -> None:
    crashed = make_docker(owner="instance-a")
    assert (await run(crashed, workspace, "true")).ok
    restarted = make_docker(owner="instance-a")  # a restart that kept its instance id
    await restarted.start()
    assert containers(docker_client, workspace) == []
    assert (await run(restarted, workspace, "echo fresh")).ok


async def test_close_removes_a_sandbox_whose_creation_was_in_flight(
    make_docker: Any, workspace: Path, docker_client: Any
) -> None:
    rt = make_docker()
    task = asyncio.create_task(run(rt, workspace, "echo never"))

    async def creating() -> bool:
        return bool(rt.sandboxes.creating) or task.done()

    await eventually(creating, what="the sandbox creation to start")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await rt.close()
    mine = docker_client.containers.list(
        all=True, filters={"label": f"{LABEL_OWNER}={rt.owner}"}, ignore_removed=True
    )
    assert mine == []
    after = await run(rt, workspace, "true")
    assert after.status == "failure"
    assert "shutting down" in after.content


def test_two_removals_of_one_container_both_return_once_it_is_gone(docker_client: Any) -> None:
    """A second removal while the first is under way (the engine answers 409) waits for the
    first: a sandbox made again under the same name right after must not fail."""
    failures: list[BaseException] = []
    for _ in range(5):
        container = docker_client.containers.run(
            SANDBOX_IMAGE, ["sleep", "infinity"], detach=True, init=True
        )

        def remove(container_id: str = str(container.id)) -> None:
            try:
                remove_container(docker_client, container_id)
            except Exception as exc:  # collected and asserted below
                failures.append(exc)

        threads = [threading.Thread(target=remove) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        with pytest.raises(docker.errors.NotFound):
            docker_client.api.inspect_container(container.id)
    assert failures == []


async def test_a_full_tmp_is_refused_and_does_not_break_the_sandbox(
    make_docker: Any, workspace: Path
) -> None:
    rt = make_docker(sandbox_memory="256m")
    assert rt.sandboxes.containers.tmp_size == 64 * 1024 * 1024  # a quarter of the memory
    size = await run(rt, workspace, "df -k --output=size /tmp | tail -1")
    assert int(stdout_of(size)) == 64 * 1024
    fill = await run(rt, workspace, "head -c 400M /dev/zero > /tmp/fill")
    assert fill.status == "failure"
    assert "No space left on device" in fill.content
    assert stdout_of(await run(rt, workspace, "echo still works")) == "still works\n"


async def test_the_command_after_memory_ran_out_runs_in_a_fresh_sandbox(
    make_docker: Any, workspace: Path
) -> None:
    # a /tmp bigger than the memory (what every sandbox had before): filling it leaves
    # no memory for any process, the runner included, until the sandbox is replaced
    rt = make_docker(sandbox_memory="128m", sandbox_tmp_size="1g")
    assert (await run(rt, workspace, "echo hi > kept.txt")).ok
    fill = await run(rt, workspace, "head -c 600M /dev/zero > /tmp/fill; sleep 1")
    assert "the next command starts in a fresh sandbox" in fill.content, fill.content
    after = await run(rt, workspace, "cat kept.txt; ls /tmp")
    assert after.ok, after.content
    assert stdout_of(after) == "hi\n"  # the workspace kept, the full /tmp gone


async def test_deployments_behind_one_workspace_path_keep_each_others_sandboxes(
    make_docker: Any, workspace: Path, docker_client: Any, tmp_path: Path
) -> None:
    # two apps in containers both see WORKSPACE_DIR as /app/workspace; only the host folders
    # behind it (SANDBOX_HOST_WORKSPACE_DIR) differ
    root = tmp_path / "workspace"
    other_host = tmp_path / "other-host"
    (other_host / "user_1" / "Conversation_1").mkdir(parents=True)
    first = make_docker(sandbox_host_workspace_dir=root)
    second = make_docker(sandbox_host_workspace_dir=other_host)
    assert (await run(first, workspace, "true")).ok
    await second.start()  # must not take the first one's sandbox for an orphan
    assert len(containers(docker_client, workspace)) == 1
    assert (await run(first, workspace, "echo still here")).ok


async def test_container_killed_from_outside(
    make_docker: Any, workspace: Path, docker_client: Any
) -> None:
    rt = make_docker()
    assert (await run(rt, workspace, "true")).ok
    (container,) = containers(docker_client, workspace)
    container.kill()
    # idle death: the next command starts a fresh container transparently
    assert stdout_of(await run(rt, workspace, "echo fresh")) == "fresh\n"
    # death during a command: a failure that says so, then a fresh container again
    task = asyncio.create_task(run(rt, workspace, "echo $$ > pid; sleep 300"))
    await wait_for_file(workspace / "pid")
    running = [c for c in containers(docker_client, workspace) if c.status == "running"]
    for c in running:
        c.kill()
    result = await task
    assert result.status == "failure"
    assert "sandbox container stopped" in result.content
    assert stdout_of(await run(rt, workspace, "echo again")) == "again\n"


async def test_missing_image_says_how_to_build_it(make_docker: Any, workspace: Path) -> None:
    assert await make_docker().available() is True
    rt = make_docker(sandbox_image="planact-no-such-image:none")
    assert await rt.available() is False
    result = await run(rt, workspace, "true")
    assert result.status == "failure"
    assert "make sandbox-image" in result.content
    # files still work host-side
    assert (await write(rt, workspace, "a.txt", "a")).ok
    assert (await read(rt, workspace, "a.txt")).content == "a"


async def test_a_command_killing_the_runner_fails_alone(make_docker: Any, workspace: Path) -> None:
    rt = make_docker()
    result = await run(rt, workspace, "kill -KILL $PPID; sleep 5")
    assert result.status == "failure"
    assert stdout_of(await run(rt, workspace, "echo next")) == "next\n"
    everyone = await run(rt, workspace, "kill -KILL -1; sleep 5")
    assert everyone.status == "failure"
    assert stdout_of(await run(rt, workspace, "echo after")) == "after\n"


@pytest.mark.parametrize("make_docker", ["runner"], indirect=True)  # the runner's guarantee
async def test_commands_die_when_the_server_hangs_up(
    make_docker: Any, workspace: Path, docker_client: Any
) -> None:
    rt = make_docker()
    assert rt.use_runner
    task = asyncio.create_task(run(rt, workspace, "echo $$ > pid; sleep 4545"))
    await wait_for_file(workspace / "pid")
    (sandbox,) = rt.sandboxes.by_key.values()
    assert sandbox.runner is not None
    sandbox.runner.close()  # what a crashed server's connection does
    result = await task
    assert result.status == "failure"
    assert "command runner stopped" in result.content
    (container,) = containers(docker_client, workspace)

    async def gone() -> bool:
        procs = await asyncio.to_thread(container.top)
        return not any("4545" in " ".join(p) for p in procs["Processes"])

    await eventually(gone, what="the command of a hung-up runner to die")
    assert stdout_of(await run(rt, workspace, "echo new runner")) == "new runner\n"
