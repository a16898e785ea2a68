"""What the actions' cards show (meta.json of their final message) and how `planact run`
prints it; what the model reads (the content) stays the same words."""

from __future__ import annotations

from pathlib import Path

from backend.actions.model import Action
from backend.actions.registry import ActionContext, builtin_registry
from backend.actions.values import scrub_data
from backend.messages.payloads import plain_items
from backend.runtime.diffs import DIFF_CAP, edit_diff
from backend.runtime.local import LocalRuntime

REGISTRY = builtin_registry()

PROGRAM = "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(10))

shown = REGISTRY.show


async def act(tmp_path: Path, name: str, **params: str):  # type: ignore[no-untyped-def]
    ctx = ActionContext(LocalRuntime(terminal_timeout=5), tmp_path)
    return await REGISTRY.execute(ctx, Action(name, params))


async def test_a_command_carries_its_exit_code_and_each_stream(tmp_path: Path) -> None:
    done = await act(tmp_path, "terminal_run", command="echo out; echo err >&2; exit 3")
    assert done.status == "failure"
    assert plain_items(done.data) == [
        {
            "command": "echo out; echo err >&2; exit 3",
            "exit_code": 3,
            "stdout": "out\n",
            "stderr": "err\n",
            "timed_out": False,
            "note": "",
        }
    ]
    # what the model reads is unchanged
    assert done.content == "Exit code: 3\nstdout:\nout\n\nstderr:\nerr\n"
    assert shown("terminal_run", done.content, plain_items(done.data), failed=True) == (
        "$ echo out; echo err >&2; exit 3  [exit 3]\n| out\n! err"
    )


async def test_a_command_that_times_out_says_so_without_an_exit_code(tmp_path: Path) -> None:
    ctx = ActionContext(LocalRuntime(terminal_timeout=0.5), tmp_path)
    done = await REGISTRY.execute(
        ctx, Action("terminal_run", {"command": "echo started; sleep 30"})
    )
    (d,) = plain_items(done.data)
    assert d["timed_out"] is True and d["exit_code"] is None
    assert d["stdout"] == "started\n"
    printed = shown("terminal_run", done.content, [d], failed=True)
    assert printed is not None
    assert printed.startswith("$ echo started; sleep 30  [timed out]\n| started\n")
    assert "Command timed out after 0.5 seconds" in printed


async def test_a_long_output_is_printed_by_its_last_lines(tmp_path: Path) -> None:
    done = await act(tmp_path, "terminal_run", command="seq 100")
    printed = shown("terminal_run", done.content, plain_items(done.data))
    assert printed is not None
    lines = printed.split("\n")
    assert lines[:2] == ["$ seq 100  [exit 0]", "| [… 80 lines above …]"]
    assert lines[2] == "| 81" and lines[-1] == "| 100"


async def test_a_write_carries_the_written_content_and_prints_its_first_lines(
    tmp_path: Path,
) -> None:
    done = await act(tmp_path, "write_code", path="app.py", content=PROGRAM)
    assert done.content == "File app.py written successfully."
    assert plain_items(done.data) == [
        {"path": "app.py", "content": PROGRAM, "lines": 30, "truncated": False}
    ]
    printed = shown("write_code", done.content, plain_items(done.data))
    assert printed is not None
    lines = printed.split("\n")
    assert lines[0] == "File app.py written successfully. (30 lines)"
    assert lines[1:4] == [" 1 def f0(x):", " 2     return x + 0", " 3 "]
    assert lines[-1] == "[… 20 more lines …]"
    assert len(lines) == 12


async def test_a_big_write_carries_only_its_head(tmp_path: Path) -> None:
    content = "x" * 99 + "\n"
    done = await act(tmp_path, "write_code", path="big.txt", content=content * 500)
    (d,) = plain_items(done.data)
    assert d["truncated"] is True and d["lines"] == 500
    assert len(d["content"]) == 20_000


async def test_a_failed_write_carries_nothing_to_show(tmp_path: Path) -> None:
    done = await act(tmp_path, "write_code", path="../out.txt", content="x")
    assert done.status == "failure" and plain_items(done.data) == []
    assert shown("write_code", done.content, plain_items(done.data)) == ""


async def test_an_edit_carries_its_unified_diff_with_the_files_line_numbers(
    tmp_path: Path,
) -> None:
    (tmp_path / "app.py").write_text(PROGRAM)
    done = await act(
        tmp_path, "edit_file", path="app.py", old_str="return x + 4", new_str="return x * 4"
    )
    assert done.content == "File app.py edited successfully."
    (d,) = plain_items(done.data)
    assert d["path"] == "app.py"
    assert d["diff"] == (
        "--- a/app.py\n+++ b/app.py\n@@ -11,7 +11,7 @@\n     return x + 3\n \n def f4(x):\n"
        "-    return x + 4\n+    return x * 4\n \n def f5(x):\n     return x + 5\n"
    )
    printed = shown("edit_file", done.content, plain_items(done.data))
    assert printed == "File app.py edited successfully.\n" + d["diff"].rstrip("\n")


async def test_an_edit_that_changed_nothing_carries_no_diff(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(PROGRAM)
    done = await act(tmp_path, "edit_file", path="app.py", old_str="return x", new_str="y")
    assert done.status == "failure" and plain_items(done.data) == []


def test_a_diff_at_the_ends_of_a_file_and_without_a_final_newline() -> None:
    data = b"x = 1\ny = 2"
    assert edit_diff("b.py", data, data.find(b"y = 2"), 5, b"y = 3") == (
        "--- a/b.py\n+++ b/b.py\n@@ -1,2 +1,2 @@\n x = 1\n-y = 2\n"
        "\\ No newline at end of file\n+y = 3\n\\ No newline at end of file\n"
    )
    assert edit_diff("c", b"a\nb\n", 0, 2, b"") == "--- a/c\n+++ b/c\n@@ -1,2 +1 @@\n-a\n b\n"


def test_a_huge_diff_is_capped_on_a_line_boundary() -> None:
    data = b"".join(b"line %d\n" % i for i in range(10_000))
    diff = edit_diff("big", data, 0, len(data), b"")
    assert len(diff) < DIFF_CAP + 100
    assert diff.endswith("more characters of the diff not shown ...]\n")
    assert diff.split("\n")[-3].startswith("-line ")


def test_what_a_card_carries_is_made_storable() -> None:
    data = [{"stdout": "a\x00b", "n": 1, "more": ["\ud800x"], "ok": None}]
    assert scrub_data(data) == [{"stdout": "a\ufffdb", "n": 1, "more": ["\ufffdx"], "ok": None}]
