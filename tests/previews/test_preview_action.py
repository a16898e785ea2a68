"""The preview action's failures, as the model reads them, and a service's lifecycle in the
bubblewrap sandbox: bad input, a command that never listens or exits at once, one service
too many, idle services; none leaves a process behind."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import shutil
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from backend.actions.model import Action
from backend.actions.registry import builtin_registry
from backend.messages.payloads import PreviewEntry
from backend.runtime.limits import SandboxLimits
from backend.runtime.local import LocalRuntime
from backend.runtime.sandboxing import sandbox_cgroups
from tests.support.preview_bench import Bench, make_bench
from tests.support.previews import processes_with
from tests.support.runtime import require_bwrap
from tests.support.settings import make_settings

pytestmark = pytest.mark.bwrap


@pytest.fixture
async def bench(tmp_path: Path, db_url: str) -> AsyncIterator[Bench]:
    """Over SQLite and PostgreSQL (TEST_POSTGRES_URL)."""
    b = await make_bench(tmp_path, database_url=db_url)
    try:
        yield b
    finally:
        await b.host.close()
        await b.store.close()


@pytest.mark.parametrize("port", ["0", "65536", "80a", "", "-1"])
async def test_a_port_out_of_range_is_a_failure_the_model_reads(bench: Bench, port: str) -> None:
    done = await bench.preview(port=port, command="true")
    assert done.status == "failure"
    assert "'port' must be a number from 1 to 65535" in done.content
    assert await bench.rows() == []


async def test_a_bad_name_is_a_failure(bench: Bench) -> None:
    done = await bench.preview(port="8080", command="true", name="../x")
    assert done.status == "failure" and "'name'" in done.content


async def test_a_command_that_exits_at_once_fails_with_its_output(bench: Bench) -> None:
    done = await bench.preview(port="8080", command="echo cannot-bind-here >&2; exit 3")
    assert done.status == "failure"
    assert "exited (status 3)" in done.content
    assert "cannot-bind-here" in done.content
    [row] = await bench.rows()
    assert row.state == "failed"


async def test_a_command_that_never_listens_fails_after_the_start_timeout(
    tmp_path: Path,
) -> None:
    b = await make_bench(tmp_path, preview_start_timeout=1)
    marker = "neverlistens" + str(time.monotonic_ns())
    try:
        done = await b.preview(port="8080", command=f"echo started; sleep 300 # {marker}")
        assert done.status == "failure"
        assert "Nothing accepted connections on the port within 1 seconds" in done.content
        assert "started" in done.content
        assert processes_with(marker) == []
        assert [r.state for r in await b.rows()] == ["failed"]
    finally:
        await b.host.close()
        await b.store.close()


async def test_without_a_command_only_a_running_service_is_previewed(bench: Bench) -> None:
    done = await bench.preview(port="8080")
    assert done.status == "failure" and "No service of this conversation runs on port 8080" in (
        done.content
    )
    started = await bench.preview(port="8080", command="python3 -m http.server 8080")
    assert started.ok, started.content
    again = await bench.preview(port="8080", path="/docs")
    (entry,), (first,) = again.data, started.data
    assert isinstance(entry, PreviewEntry) and isinstance(first, PreviewEntry)
    assert again.ok and entry.url.endswith("/docs")
    assert entry.url.removesuffix("docs") == first.url  # the same service, the same origin


async def test_one_service_over_the_maximum_is_refused(bench: Bench) -> None:
    for port in (8001, 8002, 8003):
        done = await bench.preview(port=str(port), command=f"python3 -m http.server {port}")
        assert done.ok, done.content
    fourth = await bench.preview(port="8004", command="python3 -m http.server 8004")
    assert fourth.status == "failure"
    assert "At most 3 previews run at once" in fourth.content
    assert "app-8001 (port 8001)" in fourth.content
    # the same name replaces its service instead
    again = await bench.preview(port="8003", command="python3 -m http.server 8003")
    assert again.ok, again.content
    assert sorted(r.port for r in await bench.rows() if r.state == "ready") == [
        8001,
        8002,
        8003,
    ]


async def test_an_idle_service_is_stopped_and_leaves_no_process(tmp_path: Path) -> None:
    b = await make_bench(tmp_path, preview_idle_seconds=0.5)
    marker = "idle" + str(time.monotonic_ns())
    try:
        done = await b.preview(port="8080", command=f"python3 -m http.server 8080 # {marker}")
        assert done.ok, done.content
        assert processes_with(marker)
        deadline = time.monotonic() + 30
        while [r.state for r in await b.rows()] != ["stopped"]:
            assert time.monotonic() < deadline, await b.rows()
            await asyncio.sleep(0.05)
        assert processes_with(marker) == []
        assert not b.host.services
    finally:
        await b.host.close()
        await b.store.close()


async def test_a_service_whose_process_died_is_stopped_and_restart_brings_it_back(
    bench: Bench,
) -> None:
    marker = "dies" + str(time.monotonic_ns())
    done = await bench.preview(
        port="8080", command=f"python3 -m http.server 8080 # {marker}", name="web"
    )
    assert done.ok, done.content
    [service] = bench.host.services.values()
    service.process.kill()  # the reaper dies: the sandbox dies with it (die-with-parent)
    await service.exited
    assert service.state == "stopped"
    await bench.host.sweep()
    assert [r.state for r in await bench.rows()] == ["stopped"]
    again = await bench.preview(
        port="8080", command=f"python3 -m http.server 8080 # {marker}", name="web"
    )
    assert again.ok, again.content
    assert [r.state for r in await bench.rows()] == ["ready"]


def test_the_bwrap_root_has_python3() -> None:
    assert shutil.which("python3", path="/usr/bin")


async def test_a_service_is_stopped_at_its_maximum_age(tmp_path: Path) -> None:
    b = await make_bench(tmp_path, preview_max_seconds=0.5)
    marker = "old" + str(time.monotonic_ns())
    try:
        done = await b.preview(port="8080", command=f"python3 -m http.server 8080 # {marker}")
        assert done.ok, done.content
        row = (await b.rows())[0]
        await b.store.touch_preview(row.id, row.started_at.replace(year=2100))  # busy
        deadline = time.monotonic() + 30
        while [r.state for r in await b.rows()] != ["stopped"]:
            assert time.monotonic() < deadline, await b.rows()
            await asyncio.sleep(0.05)
        assert processes_with(marker) == []
    finally:
        await b.host.close()
        await b.store.close()


async def test_a_service_keeps_the_limits_of_its_conversations_sandbox(tmp_path: Path) -> None:
    """A service is held to what a command is (docs/api.md "Previews"): no file past the
    workspace budget, and (where the server has control groups) the conversation's memory,
    process and CPU caps."""
    sandbox = require_bwrap()
    limits_of = make_settings(tmp_path, workspace_max_mb=50, sandbox_pids=64)
    limits = SandboxLimits.from_settings(limits_of)
    cgroups = sandbox_cgroups(limits)
    runtime = LocalRuntime(
        workspace_max_mb=50,
        sandbox=dataclasses.replace(sandbox, tmp_size=limits.tmp),
        limits=limits,
        cgroups=cgroups,
    )
    b = await make_bench(tmp_path, runtime=runtime)
    try:
        command = "ulimit -f > fsize.txt; exec python3 -m http.server 8765"
        done = await b.preview(port="8765", command=command)
        assert done.status == "success", done.content
        workspace = b.ctx.workspace
        assert (workspace / "fsize.txt").read_text().strip() == str(50 * 1024)  # KiB
        if cgroups is not None:
            for base in cgroups.bases.values():
                members = (base / cgroups.key(workspace) / "cgroup.procs").read_text().split()
                assert members, f"no process of the service in {base.name}'s group"
    finally:
        await b.host.close()
        await b.store.close()
        await runtime.close()


async def test_a_service_that_grows_the_workspace_past_its_budget_is_stopped(
    tmp_path: Path,
) -> None:
    b = await make_bench(tmp_path, workspace_max_mb=20)
    try:
        writer = (
            "(i=0; while [ $i -lt 300 ]; do head -c 1048576 /dev/zero > f$i; i=$((i+1)); "
            "sleep 0.05; done) & exec python3 -m http.server 8767"
        )
        done = await b.preview(port="8767", command=writer)
        assert done.status == "success", done.content
        deadline = time.monotonic() + 30
        while (await b.rows())[0].state != "failed":
            assert time.monotonic() < deadline, "the service was not stopped at the budget"
            await asyncio.sleep(0.1)
        (row,) = await b.rows()
        assert "WORKSPACE_MAX_MB" in row.log[-1], row.log[-3:]
        used = sum(f.stat().st_size for f in b.ctx.workspace.glob("f*"))
        assert used < 100 * 1024 * 1024  # stopped near the budget, not after 300 MB
        settled = len(list(b.ctx.workspace.glob("f*")))
        assert processes_with("8767") == []  # no writer left
        assert len(list(b.ctx.workspace.glob("f*"))) == settled
    finally:
        await b.host.close()
        await b.store.close()


async def test_a_service_that_waits_on_its_own_children_ends_when_they_do(bench: Bench) -> None:
    """`app & wait` waits for the app only, not for the forwarder the service runs beside it
    (which would keep a dead app's service alive for ever)."""
    marker = "waits" + str(time.monotonic_ns())
    app = "import http.server as h; h.test(HandlerClass=h.SimpleHTTPRequestHandler, port=8080)"
    done = await bench.preview(port="8080", command=f"python3 -c '{app}' {marker} & wait")
    assert done.ok, done.content
    [service] = bench.host.services.values()
    [app_pid] = [p for p in processes_with(marker) if _last_argument(p) == marker]
    os.kill(app_pid, signal.SIGKILL)
    await asyncio.wait_for(service.exited, timeout=30)
    assert service.state == "stopped"


def _last_argument(pid: int) -> str:
    with open(f"/proc/{pid}/cmdline", "rb") as fh:
        return fh.read().rstrip(b"\0").split(b"\0")[-1].decode()


async def test_a_person_runs_at_most_the_per_user_maximum_across_conversations(
    tmp_path: Path,
) -> None:
    b = await make_bench(tmp_path, preview_max_per_user=2)
    try:
        for port in (8001, 8002):
            started = await b.preview(port=str(port), command=f"python3 -m http.server {port}")
            assert started.ok, started.content
        other = await b.conversation()
        params = {"port": "8003", "command": "python3 -m http.server 8003"}
        done = await builtin_registry().execute(other, Action("preview", params))
        assert done.status == "failure"
        assert "At most 2 previews run at once for one person" in done.content
        assert "PREVIEW_MAX_PER_USER" in done.content and "app-8001 (port 8001)" in done.content
        # one stopped: a place again, in any conversation
        assert await b.host.stop(b.cid, "app-8001") is not None
        again = await builtin_registry().execute(other, Action("preview", params))
        assert again.ok, again.content
    finally:
        await b.host.close()
        await b.store.close()


async def test_a_preview_can_be_a_new_conversations_first_action(bench: Bench) -> None:
    first = await bench.conversation()
    assert not first.workspace.exists()
    params = {"port": "8080", "command": "python3 -m http.server 8080"}
    done = await builtin_registry().execute(first, Action("preview", params))
    assert done.ok, done.content


async def test_a_stopped_preview_says_why(bench: Bench) -> None:
    started = await bench.preview(port="8080", command="python3 -m http.server 8080", name="web")
    assert started.ok, started.content
    await bench.host.stop(bench.cid, "web")
    [row] = await bench.rows()
    assert row.state == "stopped"
    assert bench.host.log_of(row)[-1] == "Stopped: stopped by the person."
