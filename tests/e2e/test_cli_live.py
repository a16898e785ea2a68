"""`planact run` prints a running command's output live, line by line, before it ends."""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path

import pytest

from tests.agent.scripts import finish, plan_reply, run
from tests.e2e.server import PLANACT, server_env, wait_for
from tests.fakellm import FakeModelServer

pytestmark = pytest.mark.e2e

WAIT_FOR_GO = (
    "echo first; echo oops >&2; "
    "for i in $(seq 600); do [ -f go ] && break; sleep 0.05; done; echo second"
)


def test_run_prints_live_command_output(tmp_path: Path, fake_model: FakeModelServer) -> None:
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Print")},
        {"stage": "thinking", "content": run(WAIT_FOR_GO) + finish("printed")},
    )
    ws = tmp_path / "ws"
    env = {**os.environ, **server_env(tmp_path, fake_model.base_url)}
    proc = subprocess.Popen(
        [PLANACT, "run", "print lines", "--mode", "agent", "--workspace", str(ws)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    lines: list[str] = []
    saw_first = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            if line.startswith("  | first"):
                saw_first.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        wait_for(saw_first.is_set, timeout=60, what="the live line 'first'")
        # the command is still waiting for this file: the line was printed while it ran
        assert not any(line.startswith("[terminal_run ok]") for line in lines)
        (conv,) = ws.glob("user_*/Conversation_*")
        (conv / "go").write_text("")
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        reader.join(10)
        assert proc.stdout is not None
        proc.stdout.close()
    first = lines.index("  | first")
    assert "  ! oops" in lines
    second = lines.index("  | second")
    done = next(i for i, x in enumerate(lines) if x.startswith("[terminal_run ok]"))
    assert lines[first - 1].startswith("[terminal_run …]")
    assert first < second < done
    # the command and its exit code; its output is not printed again
    assert lines[done].startswith("[terminal_run ok] $ echo first;")
    assert lines[done].endswith("  [exit 0] (output above)")
