"""The runtime contract (docs/api.md "Actions and paths"), one suite for every runtime.

Every test runs against ``local`` (unsandboxed), ``local-bwrap`` and ``docker`` and expects
the same results.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from backend.actions.model import Action
from backend.actions.registry import run_action
from backend.runtime.base import OUTPUT_CAP, READ_CAP, ActionResult, BaseRuntime
from tests.support.runtime import (
    RuntimeFactory,
    eventually,
    host_count_marked,
    process_gone,
    read,
    run,
    stdout_of,
    wait_for_file,
    write,
)

# ---- files -------------------------------------------------------------------------------

EXACT = [
    'a < b && c > d; <tag attr="&amp;">&lt;</tag>\n',
    "line one\r\nline two\r\n",
    "no final newline",
    "",
    "  leading and trailing blanks  \n\n\n",
    "unicode: héllo wörld ✓ 日本語 🚀\n",
    "tabs\tand\\backslashes\\n literal\n",
]


@pytest.mark.parametrize("content", EXACT)
async def test_write_is_byte_exact_and_reads_back(
    runtime: BaseRuntime, workspace: Path, content: str
) -> None:
    result = await write(runtime, workspace, "src/f.txt", content)
    assert result.status == "success"
    assert result.content == "File src/f.txt written successfully."
    assert result.filepath == "src/f.txt"
    assert (workspace / "src" / "f.txt").read_bytes() == content.encode()
    back = await read(runtime, workspace, "src/f.txt")
    assert back.status == "success"
    assert back.content == content
    # and the command side sees the same bytes
    listed = await run(runtime, workspace, "od -An -c src/f.txt | tr -s ' ' | tr -d '\\n'")
    expected = await asyncio.create_subprocess_exec(
        "bash",
        "-c",
        "od -An -c f.txt | tr -s ' ' | tr -d '\\n'",
        cwd=workspace / "src",
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await expected.communicate()
    assert stdout_of(listed) == out.decode()


async def test_write_through_a_symlink_inside_updates_its_target(
    runtime: BaseRuntime, workspace: Path
) -> None:
    (workspace / "target.txt").write_text("old")
    os.symlink("target.txt", workspace / "link.txt")
    result = await write(runtime, workspace, "link.txt", "new")
    assert result.ok
    assert result.filepath == "target.txt"
    assert (workspace / "link.txt").is_symlink()
    assert (workspace / "target.txt").read_text() == "new"
    overwritten = await write(runtime, workspace, "target.txt", "newer")
    assert overwritten.ok
    assert (await read(runtime, workspace, "link.txt")).content == "newer"


async def test_workspace_paths_are_the_same_folder(runtime: BaseRuntime, workspace: Path) -> None:
    result = await write(runtime, workspace, "/workspace/dir/a.txt", "A")
    assert result.ok, result.content
    assert result.filepath == "dir/a.txt"
    assert (workspace / "dir" / "a.txt").read_text() == "A"
    assert (await read(runtime, workspace, "/workspace/dir/a.txt")).content == "A"
    assert (await read(runtime, workspace, str(workspace / "dir" / "a.txt"))).content == "A"
    ran = await run(runtime, workspace, "cat a.txt", cwd="/workspace/dir")
    assert stdout_of(ran) == "A"


async def test_read_missing_file_and_directory(runtime: BaseRuntime, workspace: Path) -> None:
    missing = await read(runtime, workspace, "nope.txt")
    assert missing.status == "failure"
    assert "does not exist" in missing.content
    (workspace / "d").mkdir()
    assert (await read(runtime, workspace, "d")).status == "failure"
    assert (await write(runtime, workspace, "d", "x")).status == "failure"


async def test_binary_read_is_safe(runtime: BaseRuntime, workspace: Path) -> None:
    (workspace / "blob.bin").write_bytes(bytes(range(256)) * 10)
    result = await read(runtime, workspace, "blob.bin")
    assert result.status == "success"
    assert result.content == "blob.bin is a binary file (2560 bytes); not shown as text."


async def test_invalid_utf8_is_replaced_not_fatal(runtime: BaseRuntime, workspace: Path) -> None:
    (workspace / "latin1.txt").write_bytes("café\n".encode("latin-1"))
    result = await read(runtime, workspace, "latin1.txt")
    assert result.ok
    assert result.content == "caf\ufffd\n"


async def test_long_file_is_cut_with_a_note(runtime: BaseRuntime, workspace: Path) -> None:
    (workspace / "big.txt").write_text("y" * (READ_CAP + 5000))
    result = await read(runtime, workspace, "big.txt")
    assert result.ok
    assert result.content.startswith("y" * READ_CAP + "\n[... file is")
    assert "only the first" in result.content


# ---- confinement -------------------------------------------------------------------------

OUTSIDE_PATHS = ["../escape.txt", "a/../../escape.txt", "/etc/passwd", "/tmp/escape.txt", "/"]


@pytest.mark.parametrize("path", OUTSIDE_PATHS)
async def test_paths_outside_are_refused(
    runtime: BaseRuntime, workspace: Path, tmp_path: Path, path: str
) -> None:
    before = sorted(p.name for p in tmp_path.rglob("*"))
    wrote = await write(runtime, workspace, path, "pwned")
    assert wrote.status == "failure"
    assert wrote.content.startswith("Refused:")
    got = await read(runtime, workspace, path)
    assert got.status == "failure"
    assert got.content.startswith("Refused:")
    assert "root:" not in got.content
    ran = await run(runtime, workspace, "pwd", cwd=path)
    assert ran.status == "failure"
    assert ran.content.startswith("Refused:")
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


async def test_symlinks_leaving_the_workspace_are_refused(
    runtime: BaseRuntime, workspace: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    os.symlink(outside, workspace / "out")
    os.symlink(outside / "secret.txt", workspace / "secret-link")
    os.symlink(outside / "new.txt", workspace / "dangling")

    for path in ("out/secret.txt", "secret-link", "dangling"):
        got = await read(runtime, workspace, path)
        assert got.status == "failure", path
        assert "secret" not in got.content.replace(path, "")
    for path in ("out/new.txt", "out/sub/new.txt", "secret-link", "dangling"):
        wrote = await write(runtime, workspace, path, "pwned")
        assert wrote.status == "failure", path
    ran = await run(runtime, workspace, "touch pwned", cwd="out")
    assert ran.status == "failure"
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "secret"


async def test_nul_in_path_is_refused(runtime: BaseRuntime, workspace: Path) -> None:
    assert (await write(runtime, workspace, "a\x00b", "x")).status == "failure"


# ---- terminal_run ------------------------------------------------------------------------


async def test_exit_codes_and_streams(runtime: BaseRuntime, workspace: Path) -> None:
    ok = await run(runtime, workspace, "echo out; echo err >&2")
    assert ok.status == "success"
    assert ok.content == "Exit code: 0\nstdout:\nout\n\nstderr:\nerr\n"
    failed = await run(runtime, workspace, "echo partial; exit 3")
    assert failed.status == "failure"
    assert failed.content == "Exit code: 3\nstdout:\npartial\n\nstderr: (empty)"
    quiet = await run(runtime, workspace, "true")
    assert quiet.content == "Exit code: 0\nstdout: (empty)\nstderr: (empty)"
    killed = await run(runtime, workspace, "kill -KILL $$")
    assert killed.content.startswith("Exit code: 137\n")
    missing = await run(runtime, workspace, "no-such-command-xyz")
    assert missing.status == "failure"
    assert missing.content.startswith("Exit code: 127")


async def test_unicode_output(runtime: BaseRuntime, workspace: Path) -> None:
    result = await run(
        runtime, workspace, "printf 'h\\303\\251llo \\342\\234\\223 \\360\\237\\232\\200'"
    )
    assert stdout_of(result) == "héllo ✓ 🚀"
    broken = await run(runtime, workspace, "printf 'bad \\377 byte'")
    assert stdout_of(broken) == "bad \ufffd byte"


async def test_cwd_and_stdin(runtime: BaseRuntime, workspace: Path) -> None:
    (workspace / "sub" / "deeper").mkdir(parents=True)
    result = await run(runtime, workspace, 'basename "$PWD"; ls', cwd="sub")
    assert stdout_of(result) == "sub\ndeeper\n"
    # stdin is empty, not the server's: a command waiting for input ends at once
    got = await run(runtime, workspace, 'read -r line; echo "eof:$?"')
    assert stdout_of(got) == "eof:1\n"
    notdir = await run(runtime, workspace, "pwd", cwd="nope")
    assert notdir.status == "failure"
    assert "not a directory" in notdir.content
    assert (await run(runtime, workspace, "   ")).status == "failure"


async def test_files_written_by_commands_are_readable(
    runtime: BaseRuntime, workspace: Path
) -> None:
    result = await run(runtime, workspace, "mkdir -p out && printf 'x\\r\\ny' > out/made.txt")
    assert result.ok, result.content
    assert (workspace / "out" / "made.txt").read_bytes() == b"x\r\ny"
    assert (await read(runtime, workspace, "out/made.txt")).content == "x\r\ny"
    # a file written host-side can be changed by commands
    await write(runtime, workspace, "host.txt", "one\n")
    appended = await run(runtime, workspace, "echo two >> host.txt && cat host.txt")
    assert appended.ok, appended.content
    assert stdout_of(appended) == "one\ntwo\n"


async def test_huge_output_keeps_head_and_tail(runtime: BaseRuntime, workspace: Path) -> None:
    command = "printf BEGIN; head -c 3000000 /dev/zero | tr '\\0' x; printf END; echo oops >&2"
    result = await run(runtime, workspace, command)
    assert result.ok
    out = stdout_of(result)
    assert out.startswith("BEGIN")
    assert out.endswith("END")
    assert "characters cut from the middle of the output" in out
    assert len(out) < OUTPUT_CAP + 200
    assert result.content.endswith("stderr:\noops\n")


async def test_timeout_kills_the_process_group(make_rt: RuntimeFactory, workspace: Path) -> None:
    runtime = make_rt(terminal_timeout=2)
    command = "sleep 300 & echo $! > bg.pid; echo started; sleep 300"
    result = await run(runtime, workspace, command)
    assert result.status == "failure"
    assert result.content.startswith("Command timed out after 2 seconds")
    assert stdout_of(result) == "started\n"
    await eventually(lambda: process_gone(runtime, workspace, "bg.pid"), what="background child")


async def test_background_children_die_with_the_command(
    runtime: BaseRuntime, workspace: Path
) -> None:
    result = await run(runtime, workspace, "sleep 300 >/dev/null 2>&1 & echo $! > bg.pid")
    assert result.ok
    await eventually(lambda: process_gone(runtime, workspace, "bg.pid"), what="background child")


async def test_cancel_kills_the_command(runtime: BaseRuntime, workspace: Path) -> None:
    command = "sleep 300 & echo $! > bg.pid; echo $$ > main.pid; wait"
    task = asyncio.create_task(run(runtime, workspace, command))
    await wait_for_file(workspace / "main.pid")
    await wait_for_file(workspace / "bg.pid")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await eventually(lambda: process_gone(runtime, workspace, "main.pid"), what="main process")
    await eventually(lambda: process_gone(runtime, workspace, "bg.pid"), what="background child")
    # the runtime still works afterwards
    assert stdout_of(await run(runtime, workspace, "echo again")) == "again\n"


async def test_other_actions(runtime: BaseRuntime, workspace: Path) -> None:
    done = await run_action(runtime, Action("finish", {"message": "all done"}), workspace)
    assert (done.status, done.content) == ("success", "all done")
    odd = await run_action(runtime, Action("explode", {}), workspace)
    assert odd.status == "failure"


async def test_workspace_is_created_on_first_use(runtime: BaseRuntime, tmp_path: Path) -> None:
    ws = tmp_path / "workspace" / "user_2" / "Conversation_9"
    result = await run(runtime, ws, "echo hi > hi.txt")
    assert result.ok, result.content
    assert (ws / "hi.txt").read_text() == "hi\n"


async def test_concurrent_commands_in_one_workspace(runtime: BaseRuntime, workspace: Path) -> None:
    results = await asyncio.gather(*(run(runtime, workspace, f"echo {i}") for i in range(5)))
    assert [stdout_of(r) for r in results] == [f"{i}\n" for i in range(5)]


# ---- no process outlives its command ---------------------------------------------------

# a new session (setsid) and a double fork: both escape the command's process group
ESCAPES = (
    "setsid sh -c 'sleep 1000 & echo $! > setsid.pid'; "
    "(sh -c 'sleep 1001 & echo $! > double.pid' &); "
    "while [ ! -s setsid.pid ] || [ ! -s double.pid ]; do sleep 0.01; done; "
)


async def assert_escapes_gone(runtime: BaseRuntime, workspace: Path) -> None:
    # no polling: they are gone by the time the action returned
    assert await process_gone(runtime, workspace, "setsid.pid"), "setsid child survived"
    assert await process_gone(runtime, workspace, "double.pid"), "double-forked child survived"


async def test_escaped_processes_die_when_the_command_ends(
    runtime: BaseRuntime, workspace: Path
) -> None:
    result = await run(runtime, workspace, ESCAPES + "echo done")
    assert stdout_of(result) == "done\n", result.content
    await assert_escapes_gone(runtime, workspace)


async def test_escaped_processes_die_at_the_timeout(
    make_rt: RuntimeFactory, workspace: Path
) -> None:
    runtime = make_rt(terminal_timeout=2)
    result = await run(runtime, workspace, ESCAPES + "sleep 300")
    assert result.content.startswith("Command timed out after 2 seconds"), result.content
    await assert_escapes_gone(runtime, workspace)


async def test_escaped_processes_die_when_the_command_is_stopped(
    runtime: BaseRuntime, workspace: Path
) -> None:
    task = asyncio.create_task(run(runtime, workspace, ESCAPES + "sleep 300"))
    await wait_for_file(workspace / "double.pid")
    await wait_for_file(workspace / "setsid.pid")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await assert_escapes_gone(runtime, workspace)


async def count_marked(runtime: BaseRuntime, workspace: Path, marker: str) -> int:
    """Processes whose command line holds ``marker`` (the pattern does not match itself)."""
    if getattr(runtime, "sandbox", None) is not None:
        return host_count_marked(marker)  # a command sees its own PID namespace only
    pattern = f"[{marker[0]}]{marker[1:]}"
    script = (
        "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done 2>/dev/null "
        f"| grep -c -- '{pattern}' || true"
    )
    return int(stdout_of(await run(runtime, workspace, script)).strip())


@pytest.mark.parametrize("kind", ["long", "quick"])
async def test_cancellation_at_any_point_propagates_and_leaves_no_process(
    runtime: BaseRuntime, workspace: Path, kind: str
) -> None:
    marker = "77" + str(os.getpid() % 1000).zfill(3)
    tail = "sleep 300" if kind == "long" else "echo quick"
    cancelled = 0
    for steps in range(0, 80, 2):
        command = f"setsid sleep {marker}{steps:03d} & sleep {marker}{steps:03d} & {tail}"
        task = asyncio.create_task(run(runtime, workspace, command))
        for _ in range(steps):
            await asyncio.sleep(0)
        if task.cancel():
            cancelled += 1
            with pytest.raises(asyncio.CancelledError):
                await task
        else:
            assert (await task).ok
    assert cancelled > 0
    assert await count_marked(runtime, workspace, marker) == 0


# ---- edit_file ---------------------------------------------------------------------------


async def edit(rt: BaseRuntime, ws: Path, path: str, old: str, new: str) -> ActionResult:
    params = {"path": path, "old_str": old, "new_str": new}
    return await run_action(rt, Action("edit_file", params), ws)


async def test_edit_file_replaces_the_one_occurrence_byte_exact(
    runtime: BaseRuntime, workspace: Path
) -> None:
    original = "def f():\r\n    return 1  # é\r\n\r\nprint(f())\n"
    (workspace / "src").mkdir()
    (workspace / "src" / "app.py").write_bytes(original.encode())
    os.chmod(workspace / "src" / "app.py", 0o755)
    result = await edit(runtime, workspace, "src/app.py", "return 1  # é\r\n", "return 2\r\n")
    assert (result.status, result.content) == ("success", "File src/app.py edited successfully.")
    assert result.filepath == "src/app.py"
    assert (workspace / "src" / "app.py").read_bytes() == (
        b"def f():\r\n    return 2\r\n\r\nprint(f())\n"
    )
    assert (workspace / "src" / "app.py").stat().st_mode & 0o777 == 0o755
    ran = await run(runtime, workspace, "python3 src/app.py")
    assert stdout_of(ran) == "2\n"
    # deleting text, through /workspace and through a symlink inside
    os.symlink("src/app.py", workspace / "link.py")
    gone = await edit(runtime, workspace, "/workspace/link.py", "\r\n\r\n", "\r\n")
    assert gone.ok, gone.content
    assert gone.filepath == "src/app.py"
    assert (workspace / "link.py").is_symlink()
    assert (
        workspace / "src" / "app.py"
    ).read_bytes() == b"def f():\r\n    return 2\r\nprint(f())\n"


async def test_edit_file_refuses_zero_or_several_occurrences(
    runtime: BaseRuntime, workspace: Path
) -> None:
    (workspace / "a.txt").write_text("x = 1\nx = 1\naaa\n")
    before = (workspace / "a.txt").read_bytes()
    missing = await edit(runtime, workspace, "a.txt", "x = 2", "x = 3")
    assert missing.status == "failure"
    assert "0 occurrences" in missing.content
    assert missing.filepath == "a.txt"
    several = await edit(runtime, workspace, "a.txt", "x = 1\n", "x = 3\n")
    assert several.status == "failure"
    assert "occurs 2 times" in several.content
    overlapping = await edit(runtime, workspace, "a.txt", "aa", "b")
    assert "occurs 2 times" in overlapping.content
    # whitespace is not normalised
    loose = await edit(runtime, workspace, "a.txt", "x  = 1", "x = 3")
    assert "0 occurrences" in loose.content
    empty = await edit(runtime, workspace, "a.txt", "", "x")
    assert empty.status == "failure"
    assert "non-empty old_str" in empty.content
    assert (workspace / "a.txt").read_bytes() == before


async def test_edit_file_errors(runtime: BaseRuntime, workspace: Path, tmp_path: Path) -> None:
    nofile = await edit(runtime, workspace, "nope.py", "a", "b")
    assert (nofile.status, nofile.content) == ("failure", "File nope.py does not exist.")
    (workspace / "d").mkdir()
    assert "is a directory" in (await edit(runtime, workspace, "d", "a", "b")).content
    outside = tmp_path / "outside.txt"
    outside.write_text("a")
    os.symlink(outside, workspace / "out.txt")
    (workspace / "huge.txt").touch()
    os.truncate(workspace / "huge.txt", 17 * 1024 * 1024)  # sparse: costs no disk
    huge = await edit(runtime, workspace, "huge.txt", "a", "b")
    assert huge.status == "failure"
    assert "larger than 16 MB" in huge.content
    for path in ("../outside.txt", str(outside), "out.txt"):
        refused = await edit(runtime, workspace, path, "a", "pwned")
        assert refused.content.startswith("Refused:"), path
    assert outside.read_text() == "a"


# ---- the workspace size limit ------------------------------------------------------------


async def test_workspace_size_limit(make_rt: RuntimeFactory, workspace: Path) -> None:
    runtime = make_rt(workspace_max_mb=1)
    half = "x" * 600_000
    assert (await write(runtime, workspace, "a.txt", half)).ok
    over = await write(runtime, workspace, "b.txt", half)
    assert over.status == "failure"
    assert "over its limit of 1 MB (WORKSPACE_MAX_MB" in over.content
    assert over.filepath == "b.txt"
    assert not (workspace / "b.txt").exists()
    # replacing a file counts its old size out; shrinking is always allowed
    assert (await write(runtime, workspace, "a.txt", half + "y")).ok
    assert (await write(runtime, workspace, "a.txt", "small")).ok
    assert (await write(runtime, workspace, "b.txt", "head\n" + half)).ok
    grown = await edit(runtime, workspace, "b.txt", "head\n", "y" * 600_000)
    assert grown.status == "failure"
    assert "WORKSPACE_MAX_MB" in grown.content
    assert (workspace / "b.txt").read_text() == "head\n" + half
    pushed = await run(runtime, workspace, "head -c 2000000 /dev/zero > big.bin; echo made")
    assert pushed.status == "failure"
    assert stdout_of(pushed).startswith("made\n")
    assert "over its limit of 1 MB (WORKSPACE_MAX_MB)" in pushed.content
    refused = await write(runtime, workspace, "c.txt", "more")
    assert refused.status == "failure"
    freed = await run(runtime, workspace, "rm big.bin")
    assert freed.ok, freed.content
    assert (await write(runtime, workspace, "c.txt", "more")).ok


async def test_reading_a_fifo_fails_instead_of_hanging(
    runtime: BaseRuntime, workspace: Path
) -> None:
    made = await run(runtime, workspace, "mkfifo pipe")
    assert made.ok, made.content
    async with asyncio.timeout(30):  # a blind open() would wait for a writer forever
        got = await read(runtime, workspace, "pipe")
    assert got.status == "failure"
    assert "Not a regular file" in got.content
