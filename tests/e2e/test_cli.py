"""`planact run "GOAL"`: progress as it goes, exit code by outcome."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.agent.scripts import finish, plan_reply, run, write
from tests.e2e.server import PLANACT, server_env
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
    assert lines[0].startswith("[question ok] write a python script")
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
    assert "[error FAIL]" in proc.stdout and "usable plan" in proc.stdout
