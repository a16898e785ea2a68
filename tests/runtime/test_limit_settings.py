"""The sandbox limits as read from the settings, and where control groups come from
(backend/runtime/limits): bad values are clear errors, a host without usable groups says
why and gets the rlimit fallback."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from backend.runtime.limits import MB, SandboxLimits, parse_size
from backend.runtime.limits.cgroups import Cgroups
from tests.conftest import make_settings


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


def test_a_unified_hierarchy_is_not_used(tmp_path: Path) -> None:
    (tmp_path / "cgroup.controllers").write_text("memory pids cpu\n")
    found = Cgroups.detect(SandboxLimits(), root=tmp_path)
    assert isinstance(found, str) and "v2" in found


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
