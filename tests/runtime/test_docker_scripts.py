"""What runs inside a docker sandbox (backend/runtime/docker/scripts), tested without Docker.

The pure parts of the command runner are called directly. The runner itself and the shell
scripts run for real under bubblewrap, in a PID namespace of their own and as uid 1000 under
a root pid 1 (as in a sandbox, where init runs as another uid): they kill every process of
their user (`kill -1`), which must never reach this machine's processes. Every wait has a
deadline that only a broken script reaches.
"""

from __future__ import annotations

import base64
import functools
import json
import os
import queue
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from backend.runtime.docker import scripts
from backend.runtime.docker.execs import read_trailer
from backend.runtime.docker.scripts import sandbox_runner

SHELL_SCRIPTS = ["wrapper.sh", "killer.sh", "sweeper.sh"]
DEADLINE = 30.0  # seconds; only a broken script waits that long


# ---- the files ship with the package and are what the runtime sends ----------------------


def test_scripts_are_read_from_the_package_files() -> None:
    here = Path(scripts.__file__).parent
    sent = {
        "sandbox_runner.py": scripts.RUNNER,
        "wrapper.sh": scripts.WRAPPER,
        "killer.sh": scripts.KILLER,
        "sweeper.sh": scripts.SWEEPER,
    }
    for name, text in sent.items():
        assert (here / name).read_text() == text


@pytest.mark.parametrize("name", SHELL_SCRIPTS)
def test_shell_scripts_parse(name: str) -> None:
    path = Path(scripts.__file__).parent / name
    check = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr


# ---- the runner's pure parts ---------------------------------------------------------------


def test_oom_kills_reads_cgroup_v2_then_v1(tmp_path: Path) -> None:
    v2, v1 = tmp_path / "memory.events", tmp_path / "memory.oom_control"
    v2.write_text("low 0\nhigh 0\nmax 4\noom 2\noom_kill 3\noom_group_kill 0\n")
    v1.write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 7\n")
    assert sandbox_runner.oom_kills((str(v2), str(v1))) == 3
    assert sandbox_runner.oom_kills((str(tmp_path / "none"), str(v1))) == 7
    assert sandbox_runner.oom_kills((str(tmp_path / "none"),)) == 0
    v2.write_text("low 0\n")  # readable but no count: 0, not the next file
    assert sandbox_runner.oom_kills((str(v2), str(v1))) == 0


def fake_process(proc: Path, pid: str, state: str, uid: int) -> None:
    (proc / pid).mkdir()
    (proc / pid / "status").write_text(
        f"Name:\tx\nState:\t{state} (x)\nTgid:\t{pid}\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\n"
    )


def test_leftovers_are_live_processes_of_the_user_but_the_runner(tmp_path: Path) -> None:
    fake_process(tmp_path, "10", "S", 1000)  # a leftover
    fake_process(tmp_path, "11", "Z", 1000)  # a zombie: already dead
    fake_process(tmp_path, "12", "R", 65534)  # the container's own (another uid)
    fake_process(tmp_path, "13", "S", 1000)  # the runner itself
    (tmp_path / "14").mkdir()  # gone while listed: no status
    (tmp_path / "self").mkdir()
    assert sandbox_runner.leftovers(13, 1000, str(tmp_path)) == ["10"]


def fake_stat(proc: Path, pid: str, ppid: int, sid: int) -> None:
    (proc / pid / "stat").write_text(f"{pid} (a (b) c) S {ppid} {sid} {sid} 0 -1 4194304\n")


def test_the_sweep_spares_the_sessions_of_services_not_leftovers(tmp_path: Path) -> None:
    """A session led by a docker exec (parent 0) other than the runner is a service's."""
    for pid, ppid, sid in [
        ("1", 0, 1),  # the container's init
        ("13", 0, 13),  # the runner (an exec)
        ("20", 0, 20),  # a service (an exec)
        ("21", 20, 20),  # its app
        ("30", 13, 30),  # a command of the runner, in a session of its own
        ("31", 1, 31),  # a command's leftover: setsid and a double fork
        ("32", 1, 20),  # an orphan still in the service's session
    ]:
        fake_process(tmp_path, pid, "S", 1000)
        fake_stat(tmp_path, pid, ppid, sid)
    sessions = sandbox_runner.service_sessions(13, str(tmp_path))
    assert sessions == [20]
    left = sandbox_runner.leftovers(13, 1000, str(tmp_path), spare=tuple(sessions))
    assert sorted(left, key=int) == ["1", "30", "31"]  # init is another uid in a sandbox


def test_exit_codes_and_message_lines() -> None:
    assert sandbox_runner.exit_code(3) == 3
    assert sandbox_runner.exit_code(-9) == 137  # killed by SIGKILL, as a shell says
    assert sandbox_runner.encode({"id": "a", "exit": 0}) == b'{"id":"a","exit":0}\n'


def test_the_wrapper_trailer_is_read() -> None:
    assert read_trailer(b"\n@planact:ab12:4:0:1\n") == (4, False, True)
    assert read_trailer(b"\n@planact:ab12:137:1:0") == (137, True, False)


# ---- real runs in a PID namespace ----------------------------------------------------------


SYSTEM_PYTHON = shutil.which("python3", path="/usr/bin:/bin") or "python3"


@functools.cache
def _bwrap_problem() -> str | None:
    if shutil.which("bwrap") is None:
        return "bwrap is not installed"
    probe = subprocess.run(
        [*sandboxed(), "readlink", "/proc/self/ns/pid"], capture_output=True, text=True
    )
    if probe.returncode != 0:
        return f"bwrap cannot make a PID namespace here: {probe.stderr.strip()}"
    if probe.stdout.strip() == os.readlink("/proc/self/ns/pid"):
        return "bwrap did not make a PID namespace"  # kill -1 would reach this machine
    return None


def sandboxed() -> list[str]:
    """A fresh PID namespace and /tmp (mode 1777); root pid 1, the command as uid 1000 (as
    in a sandbox)."""
    return [
        *("bwrap", "--unshare-pid", "--die-with-parent", "--ro-bind", "/", "/"),
        *("--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--tmpfs", "/tmp"),
        *("--cap-add", "ALL"),
        *("setpriv", "--reuid=1000", "--regid=1000", "--clear-groups"),
    ]


@pytest.fixture
def pid_namespace() -> list[str]:
    problem = _bwrap_problem()
    if problem is not None:
        pytest.skip(problem)
    return sandboxed()


class RunnerProcess:
    """The command runner under bubblewrap, spoken to as the server does."""

    def __init__(self, prefix: list[str]) -> None:
        self.proc = subprocess.Popen(
            # the distribution's python3, as in a sandbox image (the venv's may sit under a
            # /tmp that the sandbox replaces)
            [*prefix, SYSTEM_PYTHON, "-u", "-c", scripts.RUNNER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd="/",
        )
        self.lines: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(json.loads(line))
        self.lines.put(None)

    def send(self, **msg: Any) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(msg).encode() + b"\n")
        self.proc.stdin.flush()

    def next(self) -> dict[str, Any]:
        msg = self.lines.get(timeout=DEADLINE)
        assert msg is not None, "the runner exited"
        return msg

    def run(self, rid: str, cmd: str, timeout: float = 20.0) -> None:
        self.send(op="run", id=rid, cmd=cmd, cwd="/tmp", timeout=timeout)

    def until_end(self, rid: str) -> tuple[str, str, dict[str, Any]]:
        """(stdout, stderr, end message) of the run ``rid``."""
        out, err = b"", b""
        while True:
            msg = self.next()
            assert msg.get("id") == rid, msg
            if "out" in msg:
                out += base64.b64decode(msg["out"])
            elif "err" in msg:
                err += base64.b64decode(msg["err"])
            else:
                return out.decode(), err.decode(), msg

    def hang_up(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        return self.proc.wait(timeout=DEADLINE)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.reader.join(DEADLINE)
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()


@pytest.fixture
def runner(pid_namespace: list[str]) -> Iterator[RunnerProcess]:
    r = RunnerProcess(pid_namespace)
    try:
        assert "hello" in r.next()
        yield r
    finally:
        r.close()


def test_runner_reports_output_and_exit_code(runner: RunnerProcess) -> None:
    runner.run("a", "echo out; echo err >&2; exit 3")
    out, err, end = runner.until_end("a")
    assert (out, err) == ("out\n", "err\n")
    assert end == {"id": "a", "exit": 3, "timeout": False, "oom": False, "oom_kill": False}


def test_runner_kills_a_command_at_its_timeout(runner: RunnerProcess) -> None:
    runner.run("t", "echo started; sleep 300", timeout=0.3)
    out, _, end = runner.until_end("t")
    assert out == "started\n"
    assert end["timeout"] is True and end["exit"] == 137


def test_runner_kills_a_command_on_request(runner: RunnerProcess) -> None:
    runner.run("k", "echo started; sleep 300")
    assert base64.b64decode(runner.next()["out"]) == b"started\n"
    runner.send(op="kill", id="k")
    _, _, end = runner.until_end("k")
    assert end == {"id": "k", "exit": 137, "timeout": False, "oom": False, "oom_kill": False}


def test_runner_leaves_no_process_behind(runner: RunnerProcess) -> None:
    # setsid and a double fork leave the command's process group: the sweep finds them
    runner.run("s", "setsid sleep 301 & (sleep 302 &)")
    _, _, end = runner.until_end("s")
    assert end["exit"] == 0
    runner.run("c", "for p in /proc/[0-9]*; do cat $p/cmdline; echo; done | tr '\\0' ' '")
    listing, _, _ = runner.until_end("c")
    assert "sleep 301" not in listing and "sleep 302" not in listing


def test_runner_says_why_a_command_cannot_start(runner: RunnerProcess) -> None:
    runner.send(op="run", id="x", cmd="true", cwd="/no/such/dir", timeout=5)
    msg = runner.next()
    assert msg["id"] == "x" and msg["error"].startswith("could not start the command:")


def test_runner_kills_everything_and_exits_when_the_server_hangs_up(
    runner: RunnerProcess,
) -> None:
    runner.run("h", "echo started; sleep 300")
    assert base64.b64decode(runner.next()["out"]) == b"started\n"
    assert runner.hang_up() == 0


def in_namespace(prefix: list[str], driver: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*prefix, "bash", "-c", driver, "driver", *args],
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        cwd="/",
    )


def test_wrapper_runs_a_command_and_reports_in_its_trailer(pid_namespace: list[str]) -> None:
    done = in_namespace(
        pid_namespace,
        'bash -c "$1" planact r1 20 "echo hi; echo oops >&2; exit 4"',
        scripts.WRAPPER,
    )
    assert done.returncode == 4
    assert done.stdout == "hi\n"
    assert done.stderr.startswith("@planact-start:r1\n")
    body, trailer = done.stderr.split("\n@planact:r1:")
    assert body.endswith("oops\n")
    assert read_trailer(("\n@planact:r1:" + trailer).encode()) == (4, False, False)


def test_wrapper_kills_a_command_at_its_timeout(pid_namespace: list[str]) -> None:
    done = in_namespace(
        pid_namespace, 'bash -c "$1" planact r2 0.3 "sleep 300"; echo "rc=$?"', scripts.WRAPPER
    )
    assert done.stdout == "rc=137\n"
    assert done.stderr.endswith("\n@planact:r2:137:1:0\n")


def test_killer_stops_a_wrapped_command(pid_namespace: list[str]) -> None:
    driver = """
    bash -c "$1" planact r3 300 "sleep 300" 2>/tmp/err & w=$!
    until [ -s /tmp/.planact-r3 ]; do sleep 0.01; done  # the wrapper runs the command
    bash -c "$2" planact-kill r3
    wait "$w"; echo "rc=$?"; tail -1 /tmp/err
    """
    done = in_namespace(pid_namespace, driver, scripts.WRAPPER, scripts.KILLER)
    assert done.stdout == "rc=137\n@planact:r3:137:0:0\n", done.stderr


def test_sweeper_kills_every_process_of_the_user(pid_namespace: list[str]) -> None:
    # the driver stays root (the sweeper spares it, as a sandbox's init) and looks afterwards
    driver = """
    as_user() { setpriv --reuid=1000 --regid=1000 --clear-groups "$@"; }
    users_sleeps() { ps -u 1000 -o stat=,args= | grep -v '^Z' | grep -c 'sleep 30'; }
    as_user setsid sleep 303 & as_user bash -c '(sleep 304 &)'; as_user sleep 305 &
    until [ "$(users_sleeps)" = 3 ]; do sleep 0.01; done
    as_user bash -c "$1"; echo "rc=$?"
    wait; echo "left=$(users_sleeps)"
    """
    root = pid_namespace[: pid_namespace.index("setpriv")]
    done = in_namespace(root, driver, scripts.SWEEPER)
    assert done.stdout == "rc=0\nleft=0\n", done.stderr
