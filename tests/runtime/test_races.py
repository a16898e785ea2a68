"""File actions cannot be raced (docs/api.md "Actions and paths"), in every runtime.

An attacker command keeps swapping a real folder of the workspace with a symlink to a host
folder (``renameat2(RENAME_EXCHANGE)`` in a loop) while the test sends thousands of
``read_file`` and ``write_code`` actions through that folder. Not one may read the host's
file or write into the host's folder. (The code before the descriptor-based file actions
leaked in about one attempt in ten.)
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from backend.runtime import confined
from tests.support.runtime import RuntimeFactory, read, run, stdout_of, wait_for_file, write

ATTEMPTS = 3000  # read_file + write_code actions, half each
SECRET = "HOST-SECRET-d41d8cd9"

# Runs in the workspace (in the sandbox for docker): swaps "d" (a real folder) with "evil"
# (a symlink to the host folder, argv[1]) until stop.flag appears or 300 s pass.
ATTACKER = r"""
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD, RENAME_EXCHANGE = -100, 2
os.makedirs("d", exist_ok=True)
with open("d/secret.txt", "w") as fh:
    fh.write("inside\n")
os.symlink(sys.argv[1], "evil")
with open("ready", "w") as fh:
    fh.write("1")
swaps, end = 0, time.monotonic() + 300
while not os.path.exists("stop.flag") and time.monotonic() < end:
    for _ in range(100):
        if libc.renameat2(AT_FDCWD, b"d", AT_FDCWD, b"evil", RENAME_EXCHANGE) == 0:
            swaps += 1
print("swaps", swaps)
"""


@pytest.fixture(params=["openat2", "walk"])
def resolution(request: pytest.FixtureRequest) -> Iterator[str]:
    """Both ways of resolving: the kernel's openat2, and the walk it falls back to."""
    confined.use_openat2(False if request.param == "walk" else None)
    yield request.param
    confined.use_openat2(None)


async def test_swapping_a_folder_for_a_symlink_never_reaches_the_host(
    make_rt: RuntimeFactory, tmp_path: Path, resolution: str
) -> None:
    runtime = make_rt(terminal_timeout=600)
    workspace = tmp_path / "workspace" / "user_1" / "Conversation_1"
    workspace.mkdir(parents=True)
    host = tmp_path / "host"
    host.mkdir()
    (host / "secret.txt").write_text(SECRET)
    (workspace / "attacker.py").write_text(ATTACKER)

    attacker = asyncio.create_task(run(runtime, workspace, f"python3 attacker.py {host}"))
    leaked_reads = 0
    reads_ok = writes_ok = refused = 0
    try:
        await wait_for_file(workspace / "ready")
        for i in range(ATTEMPTS // 2):
            got = await read(runtime, workspace, "d/secret.txt")
            if SECRET in got.content:
                leaked_reads += 1
            reads_ok += got.ok
            wrote = await write(runtime, workspace, f"d/w{i}.txt", "attacker-named file")
            writes_ok += wrote.ok
            refused += not got.ok
        assert not attacker.done(), (await attacker).content
    finally:
        (workspace / "stop.flag").write_text("stop")
        result = await attacker
    swaps = int(stdout_of(result).split()[-1])
    print(
        f"{resolution}: {ATTEMPTS} attempts, {swaps} swaps by the attacker, "
        f"{reads_ok} reads and {writes_ok} writes inside, {refused} reads refused"
    )
    assert swaps > 0, result.content
    assert leaked_reads == 0
    assert sorted(p.name for p in host.iterdir()) == ["secret.txt"]
    assert (host / "secret.txt").read_text() == SECRET
