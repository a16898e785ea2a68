"""`planact run "GOAL"`: progress as it goes, exit code by outcome."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.agent.scripts import finish, plan_reply, run, write
from tests.e2e.server import PLANACT, PROCESS_DEADLINE, server_env
from tests.fakellm import FakeModelServer

pytestmark = pytest.mark.e2e


def planact_run(tmp_path: Path, model_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **server_env(tmp_path, model_url)}
    return subprocess.run(
        [PLANACT, "run", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_run_completes_and_exits_0(tmp_path: Path, fake_model: FakeModelServer) -> None:
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Write and run")},
        {
            "stage": "thinking",
            "content": write("hello.py", 'print("hi & <bye>")\n')
            + run("python3 hello.py > out.txt")
            + finish("Wrote hello.py; output in out.txt"),
        },
    )
    ws = tmp_path / "ws"
    proc = planact_run(
        tmp_path, fake_model.base_url, "write a python script", "--workspace", str(ws)
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("[goal] write a python script")
    assert any(line.startswith("[plan] Write and run") for line in lines)
    assert any(line.startswith("[terminal_run ok]") for line in lines)
    assert "[files] hello.py, out.txt" in proc.stdout
    assert "completed" in lines[-1]
    (out,) = ws.rglob("out.txt")
    assert out.read_text() == "hi & <bye>\n"


def test_run_that_fails_exits_1(tmp_path: Path, fake_model: FakeModelServer) -> None:
    fake_model.script(*({"stage": "planning", "content": "no plan, sorry"},) * 3)
    proc = planact_run(tmp_path, fake_model.base_url, "write code", "--mode", "agent")
    assert proc.returncode == 1
    assert "[error FAIL]" in proc.stdout and "answered without a plan" in proc.stdout
    assert proc.stdout.count("[auto_reply] no plan, sorry") == 3  # what the model said


def quiet_env(tmp_path: Path, model_url: str) -> dict[str, str]:
    """The environment a person has: no LOG_LEVEL."""
    env = {**os.environ, **server_env(tmp_path, model_url)}
    env.pop("LOG_LEVEL", None)
    return env


def test_run_with_input_files(tmp_path: Path, fake_model: FakeModelServer) -> None:
    data = tmp_path / "in" / "data.csv"
    data.parent.mkdir()
    data.write_text("city,temp\nOslo,3\nRome,18\n")
    notes = tmp_path / "notes.txt"
    notes.write_bytes(b"\x00\x01binary-ish\n")
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Count rows")},
        {"stage": "thinking", "content": run("wc -l < data.csv > rows.txt") + finish("Counted.")},
    )
    ws = tmp_path / "ws"
    proc = planact_run(
        tmp_path,
        fake_model.base_url,
        "count the rows of data.csv",
        "--workspace",
        str(ws),
        "--file",
        str(data),
        "--file",
        str(notes),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[0] == "[files given] data.csv, notes.txt"
    (rows,) = ws.rglob("rows.txt")
    assert rows.read_text().strip() == "3"
    assert (rows.parent / "notes.txt").read_bytes() == b"\x00\x01binary-ish\n"
    planning = fake_model.model.calls[0]
    assert planning["stage"] == "planning"
    assert "- data.csv" in planning["messages"][0]["content"]


def test_run_with_a_missing_file_exits_2_before_anything_runs(
    tmp_path: Path, fake_model: FakeModelServer
) -> None:
    proc = planact_run(tmp_path, fake_model.base_url, "goal", "--file", str(tmp_path / "nope.csv"))
    assert proc.returncode == 2
    assert "--file" in proc.stderr and "nope.csv: no such file" in proc.stderr
    assert fake_model.model.calls == []
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "x.txt").write_text("1")
    (b / "x.txt").write_text("2")
    files = ["--file", str(a / "x.txt"), "--file", str(b / "x.txt")]
    proc = planact_run(tmp_path, fake_model.base_url, "goal", *files)
    assert proc.returncode == 2 and "same name" in proc.stderr


def test_run_over_the_upload_limit_exits_2(tmp_path: Path, fake_model: FakeModelServer) -> None:
    big = tmp_path / "big.bin"
    big.write_bytes(b"x" * 20_000)
    env = {**quiet_env(tmp_path, fake_model.base_url), "UPLOAD_MAX_MB": "0.01"}
    proc = subprocess.run(
        [PLANACT, "run", "goal", "--file", str(big)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert "big.bin is larger than UPLOAD_MAX_MB" in proc.stdout
    assert fake_model.model.calls == []


def test_errors_are_printed_whole_and_without_library_noise(
    tmp_path: Path, fake_model: FakeModelServer
) -> None:
    cause = "quota exceeded for this key; " + "details " * 15 + "THE-REAL-CAUSE-IS-HERE"
    long_output = "; ".join(f"line {i} of the failure" for i in range(12)) + " LAST-WORDS"
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Fail")},
        {
            "stage": "thinking",
            "content": run(f"echo '{long_output}' >&2; exit 3"),
        },
        {"stage": "thinking", "status": 400, "content": cause},
    )
    proc = subprocess.run(
        [PLANACT, "run", "do the thing", "--mode", "agent"],
        cwd=tmp_path,
        env=quiet_env(tmp_path, fake_model.base_url),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    out = proc.stdout
    # the failed command's whole output, under its FAIL line
    assert len([line for line in out.splitlines() if line.startswith("[terminal_run FAIL]")]) == 1
    assert f"    ! {long_output}" in out.split("[terminal_run FAIL]", 1)[1]  # stderr, whole
    (error_line,) = [line for line in out.splitlines() if line.startswith("[error FAIL]")]
    assert "THE-REAL-CAUSE-IS-HERE" in error_line
    everything = proc.stdout + proc.stderr
    for noise in ("LiteLLM", "litellm.", "INFO", "alembic", "HTTP Request:", "Give Feedback"):
        assert noise not in everything.replace("litellm.BadRequestError", ""), noise


def test_run_help_describes_every_argument_and_offers_model() -> None:
    for command in ("run", "serve", "worker"):
        proc = subprocess.run(
            [PLANACT, command, "--help"], capture_output=True, text=True, timeout=PROCESS_DEADLINE
        )
        assert proc.returncode == 0, proc.stderr
        # argparse prints an argument without help as its name alone, followed by the
        # next argument: every argument has a text on its line or the line below
        options = proc.stdout.split("options:", 1)[1]
        lines = proc.stdout.split("arguments:", 1)[-1].splitlines()
        for i, line in enumerate(lines):
            if not line.startswith("  ") or line.startswith("   "):
                continue  # a heading, or a description's continuation
            described = "  " in line.strip() or (
                i + 1 < len(lines) and lines[i + 1].startswith("     ")
            )
            assert described, (command, line)
        if command == "run":
            assert "--model MODEL" in proc.stdout and "LLM_MODELS" in proc.stdout
            positional = proc.stdout.split("positional arguments:", 1)[1].split("options:")[0]
            assert "what the agent should do" in positional
            assert "--approval {never,risky,always}" in proc.stdout
            assert "APPROVAL_MODE" in proc.stdout and "Needs a terminal" in proc.stdout
            for flag in ("--runtime", "--workspace", "--mode", "--file", "--approval"):
                block = options.split(flag, 1)[1].split("\n  -", 1)[0]
                assert len(block.split()) > 2, (flag, block)
        if command == "serve":
            for flag in ("--host HOST", "--port PORT"):
                rest = options.split(flag, 1)[1].split("\n", 1)[0]
                assert rest.strip(), (flag, options)


def test_run_model_picks_the_model_of_the_run(tmp_path: Path, fake_model: FakeModelServer) -> None:
    fake_model.script({"stage": "auto_reply", "content": "Hello."})
    env = {**quiet_env(tmp_path, fake_model.base_url), "LLM_MODELS": "openai/other-model"}
    args = ["say hello", "--mode", "chat", "--model", "openai/other-model"]
    proc = subprocess.run(
        [PLANACT, "run", *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [c["model"] for c in fake_model.model.calls] == ["other-model"]


def test_run_with_a_model_not_offered_exits_2(tmp_path: Path, fake_model: FakeModelServer) -> None:
    env = quiet_env(tmp_path, fake_model.base_url)
    proc = subprocess.run(
        [PLANACT, "run", "goal", "--model", "openai/gpt-9"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "planact: --model openai/gpt-9 is not offered; the offered models: openai/fake-model."
    )
    assert fake_model.model.calls == []


def test_run_without_a_model_says_what_to_set_and_to_run_again(
    tmp_path: Path, fake_model: FakeModelServer
) -> None:
    env = {**quiet_env(tmp_path, fake_model.base_url), "LLM_MODEL": ""}
    proc = subprocess.run(
        [PLANACT, "run", "goal"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    said = proc.stdout + proc.stderr
    assert "restart" not in said
    assert "LLM_MODEL" in said and ".env or the environment" in said
    assert "run the command again" in said
    assert "Traceback" not in said


def test_run_prints_the_work_a_command_an_edit_and_a_written_file(
    tmp_path: Path, fake_model: FakeModelServer
) -> None:
    program = "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(10))
    edit = (
        "<edit_file><path>app.py</path><old_str>return x + 4</old_str>"
        "<new_str>return x * 4</new_str></edit_file>"
    )
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Write, edit and run")},
        {
            "stage": "thinking",
            "content": write("app.py", program)
            + edit
            + run("python3 -c 'import app; print(app.f4(2))'; echo careful >&2")
            + finish("Done."),
        },
    )
    proc = planact_run(tmp_path, fake_model.base_url, "write it", "--mode", "agent")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    # the written file's first lines, numbered
    assert (
        "[write_code ok] File app.py written successfully. (30 lines)\n     1 def f0(x):\n" in out
    )
    assert "    [… 20 more lines …]\n" in out
    # the edit's diff
    assert "    @@ -11,7 +11,7 @@\n" in out
    assert "    -    return x + 4\n    +    return x * 4\n" in out
    # the command: its output as it printed (stderr marked), then its exit code
    assert "  | 8\n" in out and "  ! careful\n" in out
    assert (
        "[terminal_run ok] $ python3 -c 'import app; print(app.f4(2))'; echo careful >&2  " in out
    )
    assert "[exit 0] (output above)" in out
    assert "stdout:" not in out and "(empty)" not in out
    last = out.splitlines()[-1]
    assert last.startswith("run ") and " completed; " in last and " tokens in (" in last
    assert "; files in " in last
