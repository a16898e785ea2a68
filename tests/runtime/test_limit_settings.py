"""The sandbox limits as read from the settings, and where control groups come from
(backend/runtime/limits): bad values are clear errors, a host without usable groups says
why and gets the rlimit fallback."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pydantic import ValidationError

from backend.runtime.limits import MB, SandboxLimits, parse_size
from backend.runtime.limits.cgroups import Cgroups
from tests.support.settings import make_settings


def test_the_mb_settings_take_the_place_of_the_size_strings(tmp_path: Path) -> None:
    settings = make_settings(
        tmp_path,
        sandbox_memory="2g",
        sandbox_memory_mb=300,
        sandbox_tmp_size="1g",
        sandbox_tmp_mb=40,
        sandbox_pids=50,
        sandbox_cpus=0.5,
        workspace_max_mb=70,
    )
    limits = SandboxLimits.from_settings(settings)
    assert limits == SandboxLimits(
        memory=300 * MB, pids=50, cpus=0.5, tmp=40 * MB, workspace=70 * MB
    )


def test_defaults_and_the_older_size_strings(tmp_path: Path) -> None:
    default = SandboxLimits.from_settings(make_settings(tmp_path))
    assert (default.memory, default.pids, default.cpus) == (1024 * MB, 256, 1.0)
    assert default.tmp == 256 * MB  # at most 256 MB...
    small = SandboxLimits.from_settings(make_settings(tmp_path, sandbox_memory="512m"))
    assert small.tmp == 128 * MB  # ...and at most a quarter of the memory
    sized = SandboxLimits.from_settings(make_settings(tmp_path, sandbox_tmp_size="64m"))
    assert sized.tmp == 64 * MB


@pytest.mark.parametrize("value", ["0", "-5", "lots"])
def test_bad_mb_settings_are_refused(tmp_path: Path, value: str) -> None:
    with pytest.raises(ValidationError, match="sandbox_memory_mb"):
        make_settings(tmp_path, sandbox_memory_mb=value)
    with pytest.raises(ValidationError, match="sandbox_tmp_mb"):
        make_settings(tmp_path, sandbox_tmp_mb=value)


def test_sizes_parse_or_say_what_is_wrong() -> None:
    assert parse_size("512m") == 512 * MB
    assert parse_size("1G") == 1024 * MB
    assert parse_size("1048576") == MB
    assert parse_size("1.5g") == 1536 * MB
    with pytest.raises(ValueError, match="not a size: 'a lot'"):
        parse_size("a lot")


def unified(tmp_path: Path, offered: str) -> str:
    """A v2 hierarchy at ``tmp_path`` (files standing in for the kernel's) with the server
    in /svc; the path of its /proc/self/cgroup."""
    (tmp_path / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (tmp_path / "svc").mkdir()
    (tmp_path / "svc" / "cgroup.controllers").write_text(offered)
    (tmp_path / "svc" / "cgroup.subtree_control").write_text("\n")
    own = tmp_path / "self-cgroup"
    own.write_text("0::/svc\n")
    return str(own)


def test_a_delegated_v2_group_caps_each_conversation(tmp_path: Path) -> None:
    own = unified(tmp_path, "cpu memory pids\n")
    limits = SandboxLimits(memory=300 * MB, pids=50, cpus=0.5)
    found = Cgroups.detect(limits, root=tmp_path, proc_cgroup=own)
    assert isinstance(found, Cgroups), found
    svc = tmp_path / "svc"
    # the server moved into a leaf of its own, so that its group may hand the controllers on
    assert (svc / "planact-server" / "cgroup.procs").read_text() == str(os.getpid())
    assert (svc / "cgroup.subtree_control").read_text() == "+memory +pids +cpu"
    (base,) = found.bases.values()
    assert (
        base.parent == svc and (base / "cgroup.subtree_control").read_text() == "+memory +pids +cpu"
    )
    (procs,) = found.enter(tmp_path / "ws")
    group = Path(procs).parent
    assert group.parent == base
    assert (group / "memory.max").read_text() == str(300 * MB)
    assert (group / "pids.max").read_text() == "50"
    assert (group / "cpu.max").read_text() == "50000 100000"
    (group / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 2\n")
    assert found.oom_kills(tmp_path / "ws") == 2


def test_a_v2_group_without_the_controllers_is_named(tmp_path: Path) -> None:
    own = unified(tmp_path, "cpu memory\n")
    found = Cgroups.detect(SandboxLimits(), root=tmp_path, proc_cgroup=own)
    assert isinstance(found, str)
    assert found.endswith("does not offer pids (delegate them to it)")
    assert not (tmp_path / "svc" / "planact-server").exists()


def test_a_missing_controller_is_named(tmp_path: Path) -> None:
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "cgroup.procs").write_text("")
    found = Cgroups.detect(SandboxLimits(), root=tmp_path)
    assert isinstance(found, str) and "pids" in found


def test_a_group_that_cannot_be_made_is_said_and_nothing_is_left(tmp_path: Path) -> None:
    for name in ("memory", "pids", "cpu"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "cgroup.procs").write_text("")
    # the kernel says the server is in a cpu group that is not there: no child of it
    own = tmp_path / "self-cgroup"
    own.write_text("4:memory:/\n8:pids:/\n1:cpu:/gone\n0::/\n")
    found = Cgroups.detect(SandboxLimits(), root=tmp_path, proc_cgroup=str(own))
    assert isinstance(found, str) and found.startswith("cannot make a cgroup under")
    assert "cpu/gone" in found
    assert sorted(p.name for p in tmp_path.rglob("planact-*")) == []  # memory's, pids' undone


def test_a_size_that_is_no_size_is_a_clear_error(tmp_path: Path) -> None:
    from backend.runtime.base import RuntimeUnavailable
    from backend.runtime.docker.containers import Containers
    from backend.runtime.sandboxing import SandboxConfigError, local_runtime_for_process

    bad = make_settings(tmp_path, sandbox_memory="lots")
    with pytest.raises(SandboxConfigError, match="SANDBOX_MEMORY='lots' is not a size"):
        local_runtime_for_process(bad)  # the process refuses to start, saying why
    with pytest.raises(RuntimeUnavailable, match="SANDBOX_TMP_SIZE='1 ton' is not a size"):
        _ = Containers(make_settings(tmp_path, sandbox_tmp_size="1 ton"), "owner").limits
