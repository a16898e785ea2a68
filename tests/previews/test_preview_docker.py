"""A preview's service in the docker runtime is held to what the sandbox's commands are: the
same user (it writes what a command wrote, and a command what it wrote), the same file size
limit; the clean-up after a command leaves it alone but still kills the command's leftovers;
its stop leaves no process of it (app, forwarder, watchdog)."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from backend.runtime.docker import DockerRuntime
from tests.support.preview_bench import Bench, make_bench
from tests.support.previews import APP, processes_with
from tests.support.runtime import require_docker, run, runtime_settings, stdout_of

pytestmark = pytest.mark.docker


@pytest.fixture
async def docker_bench(tmp_path: Path) -> AsyncIterator[Bench]:
    require_docker()
    runtime = DockerRuntime(runtime_settings(tmp_path, workspace_max_mb=5))
    b = await make_bench(tmp_path, runtime=runtime, workspace_max_mb=5)  # type: ignore[arg-type]
    try:
        yield b
    finally:
        await b.host.close()
        await b.store.close()
        await runtime.close()


async def command(b: Bench, text: str) -> str:
    assert isinstance(b.ctx.runtime, DockerRuntime)
    result = await run(b.ctx.runtime, b.ctx.workspace, text)
    assert result.status == "success", result.content
    return stdout_of(result)


async def test_a_service_runs_as_the_commands_user_and_writes_their_files(
    docker_bench: Bench,
) -> None:
    b = docker_bench
    await command(b, "echo from-a-command > notes.txt; chmod 644 notes.txt; mkdir -p made")
    uid = (await command(b, "id -u")).strip()
    service = (
        "echo from-the-service >> notes.txt; echo served > made/by-service.txt; "
        "id -u > service-uid.txt; exec python3 -m http.server 8771"
    )
    done = await b.preview(port="8771", command=service)
    assert done.status == "success", done.content
    ws = b.ctx.workspace
    assert (ws / "notes.txt").read_text() == "from-a-command\nfrom-the-service\n"
    assert (ws / "made" / "by-service.txt").read_text() == "served\n"
    assert (ws / "service-uid.txt").read_text().strip() == uid
    # and a command may change what the service wrote
    await command(b, "echo changed > made/by-service.txt")
    assert (ws / "made" / "by-service.txt").read_text() == "changed\n"


async def test_a_service_cannot_write_a_file_past_the_size_limit(docker_bench: Bench) -> None:
    b = docker_bench
    service = (
        "head -c 8000000 /dev/zero > big.bin; echo $? > rc.txt; exec python3 -m http.server 8772"
    )
    done = await b.preview(port="8772", command=service)
    assert done.status == "success", done.content
    ws = b.ctx.workspace
    assert (ws / "rc.txt").read_text().strip() != "0"  # SIGXFSZ / EFBIG
    assert (ws / "big.bin").stat().st_size <= 5 * 1024 * 1024


async def test_the_clean_up_after_a_command_spares_the_service_not_the_leftovers(
    docker_bench: Bench,
) -> None:
    b = docker_bench
    marker = f"pv{secrets.token_hex(6)}"
    (b.ctx.workspace / "app.py").write_text(APP)
    done = await b.preview(port="8773", command=f"python3 app.py 8773 {marker}")
    assert done.status == "success", done.content
    leftover = f"sleep 3{secrets.randbelow(10**6):06d}"
    await command(b, f"setsid {leftover} > /dev/null 2>&1 < /dev/null & echo started")
    assert processes_with(leftover.split()[1]) == []  # the command's leftover: killed
    assert processes_with(marker)  # the service: still running
    (row,) = await b.rows()
    assert row.state == "ready"
    fetch = "import urllib.request as u; print(u.urlopen('http://127.0.0.1:8773/api/hello').status)"
    got = await command(b, f'python3 -c "{fetch}"')
    assert got.strip() == "200"


async def test_stopping_a_service_leaves_no_process_of_it(docker_bench: Bench) -> None:
    b = docker_bench
    marker = f"pv{secrets.token_hex(6)}"
    (b.ctx.workspace / "app.py").write_text(APP)
    service = f"(setsid sleep 300 {marker} &); python3 app.py 8774 {marker}"
    done = await b.preview(port="8774", command=service)
    assert done.status == "success", done.content
    (row,) = await b.rows()
    folder = str(Path(row.socket).parent.name)
    assert processes_with(marker) and processes_with(folder)  # the app, its forwarder
    await b.host.stop(b.cid, row.name)
    assert processes_with(marker) == []
    assert processes_with(folder) == []
    # the sandbox lives on, and its commands
    assert (await command(b, "echo still-here")).strip() == "still-here"


async def test_a_service_whose_app_exits_leaves_no_forwarder(docker_bench: Bench) -> None:
    b = docker_bench
    done = await b.preview(
        port="8775", command="python3 -m http.server 8775 & echo $! > app.pid; wait $!"
    )
    assert done.status == "success", done.content
    (row,) = await b.rows()
    folder = str(Path(row.socket).parent.name)
    assert processes_with(folder)
    pid = (b.ctx.workspace / "app.pid").read_text().strip()
    await command(b, f"kill {pid}")
    for _ in range(200):
        if (await b.rows())[0].state == "stopped" and not processes_with(folder):
            break
        await asyncio.sleep(0.05)
    assert (await b.rows())[0].state == "stopped"
    assert processes_with(folder) == []
