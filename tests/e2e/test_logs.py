"""What `planact serve` logs and what `pytest` prints last."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.agent.scripts import finish, plan_reply, run
from tests.e2e.cluster import Worker, follow, start_json
from tests.e2e.server import PLANACT, PROCESS_DEADLINE, Server, server_env, wait_for
from tests.e2e.waiting import MARKER_COMMAND, decide, pending
from tests.fakellm import FakeModelServer
from tests.pg import postgres_url, reset
from tests.sse_client import iter_events

pytestmark = pytest.mark.e2e


def test_serve_logs_one_line_per_run_start_and_end_and_no_library_noise(
    tmp_path: Path, fake_model: FakeModelServer
) -> None:
    env = server_env(tmp_path, fake_model.base_url, RUNTIME="local")
    del env["LOG_LEVEL"]  # the default a person gets
    server = Server(tmp_path, env, migrated=False).start()  # its first start migrates
    try:
        fake_model.script({"stage": "auto_reply", "content": "Hello."})
        _, end, headers = server.run({"goal": "say hello", "mode": "chat"})
        assert end["status"] == "completed"
        rid, cid = headers["x-run-id"], headers["x-conversation-id"]
        wait_for(lambda: f"run {rid} ended" in server.log.read_text(), what="the end line")
    finally:
        server.stop()
    log = server.log.read_text()
    ours = [line for line in log.splitlines() if "planact.runs" in line]
    assert len(ours) == 2, ours
    assert f"run {rid} started: conversation {cid}, mode chat, runtime local" in ours[0]
    assert "model openai/fake-model" in ours[0]
    assert f"run {rid} ended: conversation {cid}, status completed, 1 model calls" in ours[1]
    assert " tokens, " in ours[1] and ours[1].endswith(" s")
    noises = ("LiteLLM", "litellm", "alembic", "Running upgrade", "RUNTIME=local", "HTTP Request")
    for noise in noises:
        assert noise not in log, (noise, log[-3000:])


def test_debug_log_level_brings_library_lines_back(
    tmp_path: Path, fake_model: FakeModelServer
) -> None:
    # the litellm path (LLM_CLIENT=litellm): its own lines come back with DEBUG
    env = server_env(tmp_path, fake_model.base_url, LOG_LEVEL="DEBUG", LLM_CLIENT="litellm")
    server = Server(tmp_path, env, migrated=False).start()  # Alembic's lines: it migrates
    try:
        fake_model.script({"stage": "auto_reply", "content": "Hello."})
        server.run({"goal": "say hello", "mode": "chat"})
    finally:
        server.stop()
    log = server.log.read_text()
    assert "alembic" in log.lower()
    assert "LiteLLM" in log
    # what it built to start is frozen out of the cyclic collector's full collections
    frozen = re.search(r"start-up heap: (\d+) objects frozen", log)
    assert frozen is not None and int(frozen.group(1)) > 50_000, log[-3000:]


def test_pytest_summarises_skips_in_one_line_before_the_result(tmp_path: Path) -> None:
    (tmp_path / "test_some.py").write_text(
        "import pytest\n"
        "def test_ok(): pass\n"
        "@pytest.mark.parametrize('i', range(30))\n"
        "def test_needs_docker(i): pytest.skip('no Docker engine (start one)')\n"
        "def test_needs_chromium(): pytest.skip('no Chromium')\n"
    )
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.skipsummary", "-rfE", "-q", str(tmp_path)],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = proc.stdout.strip().splitlines()
    assert "SKIPPED" not in proc.stdout
    assert lines[-2] == "31 skipped: 30 x no Docker engine; 1 x no Chromium (-rs lists them)"
    assert lines[-1].startswith("1 passed, 31 skipped")


def run_pytest_with_exit_watch(tmp_path: Path, body: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_some.py").write_text(body)
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root), "PLANACT_TEST_EXIT_GRACE": "1"}
    plugins = ["-p", "tests.exitwatch", "-p", "no:cacheprovider"]
    return subprocess.run(
        [sys.executable, "-m", "pytest", *plugins, "-q", str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


STUCK_THREAD = (
    "import threading\n"
    "stuck = threading.Event()\n"
    "def test_leaves_a_thread_that_never_ends():\n"
    "    threading.Thread(target=stuck.wait, name='never-ends').start()\n"
)


def test_a_session_that_leaves_a_thread_blocked_ends_with_its_result_and_names_it(
    tmp_path: Path,
) -> None:
    """The interpreter joins non-daemon threads at exit: one that never ends kept the test
    process (and CI) waiting with nothing printed."""
    proc = run_pytest_with_exit_watch(tmp_path, STUCK_THREAD)
    assert proc.returncode == 0, proc.stderr
    assert "1 passed" in proc.stdout
    assert "has not ended 1 s after its session (exit status 0)" in proc.stderr
    assert "never-ends (daemon=False)" in proc.stderr
    assert "(most recent call first)" in proc.stderr  # every thread's stack


def test_a_failed_session_keeps_its_status_when_the_watch_ends_it(tmp_path: Path) -> None:
    proc = run_pytest_with_exit_watch(
        tmp_path, STUCK_THREAD + "def test_fails():\n    assert False\n"
    )
    assert proc.returncode == 1
    assert "1 failed, 1 passed" in proc.stdout
    assert "(exit status 1)" in proc.stderr


def test_a_session_that_leaves_nothing_running_ends_without_the_watch(tmp_path: Path) -> None:
    proc = run_pytest_with_exit_watch(tmp_path, "def test_ok():\n    pass\n")
    assert proc.returncode == 0
    assert "has not ended" not in proc.stderr


def test_query_tokens_never_reach_the_log(tmp_path: Path, fake_model: FakeModelServer) -> None:
    """Links and EventSource carry the token as ?access_token=: uvicorn's access line wrote
    it out in full, for anyone who reads the log."""
    good, wrong = "alice-secret-0123456789", "guessed-9876543210"
    env = server_env(tmp_path, fake_model.base_url, AUTH_TOKEN=good)
    del env["LOG_LEVEL"]  # the default a person gets: access lines included
    server = Server(tmp_path, env).start()
    try:
        with server.client() as c:
            listed = c.get("/api/conversations", params={"access_token": good, "q": "x"})
            assert listed.status_code == 200
            refused = c.get(f"/api/conversations?access_token={wrong}")
            assert refused.status_code == 401
            lemon = c.get(f"/lemonai/api/conversation?node_token={wrong}&api_key={wrong}")
            assert lemon.status_code == 401
        wait_for(
            lambda: server.log.read_text().count("/api/conversation") >= 2, what="access lines"
        )
    finally:
        server.stop()
    log = server.log.read_text()
    assert good not in log and wrong not in log, log[-3000:]
    access = [line for line in log.splitlines() if "GET /api/conversations?" in line]
    assert len(access) == 1, log[-3000:]  # the successful read is a DEBUG line
    assert " 401" in access[0] and "access_token=[redacted]" in access[0]


def test_every_token_spelling_that_authenticates_is_redacted_in_every_line(
    tmp_path: Path, fake_model: FakeModelServer
) -> None:
    """The server percent-decodes a query name: ``?access%5Ftoken=`` authenticates like
    ``?access_token=``, and its access line wrote the token out in clear."""
    good, wrong = "alice-secret-0123456789", "guessed-9876543210"
    env = server_env(tmp_path, fake_model.base_url, AUTH_TOKEN=good, LOG_LEVEL="DEBUG")
    server = Server(tmp_path, env).start()
    spellings = ("access%5Ftoken", "access%5ftoken", "%61ccess_token")
    try:
        with server.client() as c:
            for name in spellings:
                assert c.get(f"/api/conversations?{name}={good}").status_code == 200
                assert c.get(f"/api/conversations?{name}={wrong}").status_code == 401
        wait_for(
            lambda: server.log.read_text().count("GET /api/conversations?") >= 6,
            what="access lines",
        )
    finally:
        server.stop()
    log = server.log.read_text()
    assert good not in log and wrong not in log, log[-3000:]
    for name in spellings:
        lines = [x for x in log.splitlines() if f"GET /api/conversations?{name}=" in x]
        assert len(lines) == 2, log[-3000:]
        assert all(f"?{name}=[redacted]" in x for x in lines), lines


@pytest.mark.parametrize("level", ["INFO", "DEBUG"])
def test_successful_reads_are_debug_lines_and_changes_and_failures_info(
    tmp_path: Path, fake_model: FakeModelServer, level: str
) -> None:
    """Polls and health checks filled the log at INFO, one line each."""
    token = "alice-secret-0123456789"
    work = tmp_path
    env = server_env(work, fake_model.base_url, RUNTIME="local", AUTH_TOKEN=token)
    env["LOG_LEVEL"] = level
    server = Server(work, env).start()
    try:
        fake_model.script({"stage": "auto_reply", "content": "Hello."})
        auth: dict[str, Any] = {"headers": {"Authorization": f"Bearer {token}"}}
        server.run({"goal": "say hello", "mode": "chat"}, **auth)
        with server.client() as c:
            assert c.get("/api/health").status_code == 200
            assert c.get(f"/api/conversations?access_token={token}").status_code == 200
            assert c.get("/api/no-such-thing", **auth).status_code == 404
            wait_for(lambda: "/api/no-such-thing" in server.log.read_text(), what="the 404")
    finally:
        server.stop()
    log = server.log.read_text()
    assert token not in log
    lines = log.splitlines()
    (post,) = [x for x in lines if "POST /api/agent/run" in x]
    assert post.startswith("INFO")
    (missing,) = [x for x in lines if "GET /api/no-such-thing" in x]
    assert missing.startswith("INFO") and " 404" in missing
    reads = [x for x in lines if "GET /api/health" in x or "GET /api/conversations" in x]
    if level == "INFO":
        assert reads == [], reads
    else:
        assert len(reads) >= 2 and all(x.startswith("DEBUG") for x in reads), reads
        assert any("access_token=[redacted]" in x for x in reads)


def test_the_end_line_of_a_failed_run_says_why(tmp_path: Path, fake_model: FakeModelServer) -> None:
    env = server_env(tmp_path, fake_model.base_url, RUNTIME="local")
    del env["LOG_LEVEL"]
    server = Server(tmp_path, env).start()
    try:
        fake_model.script(*({"stage": "planning", "content": "no plan, sorry"},) * 3)
        _, end, headers = server.run({"goal": "write code", "mode": "agent"})
        assert end["status"] == "failed"
        rid = headers["x-run-id"]
        wait_for(lambda: f"run {rid} ended" in server.log.read_text(), what="the end line")
    finally:
        server.stop()
    (line,) = [x for x in server.log.read_text().splitlines() if f"run {rid} ended" in x]
    assert "status failed" in line
    reason = line.split("; reason: ", 1)[1]
    assert "answered without a plan" in reason and len(reason) <= 301


def test_serve_warns_once_at_start_when_no_model_is_set(
    tmp_path: Path, fake_model: FakeModelServer
) -> None:
    env = server_env(tmp_path, fake_model.base_url, LLM_MODEL="")
    del env["LOG_LEVEL"]
    server = Server(tmp_path, env).start()  # it still starts
    try:
        started = server.log.read_text()  # the log up to healthy
    finally:
        server.stop()
    warnings = [x for x in started.splitlines() if "WARNING" in x]
    assert len(warnings) == 1, warnings
    assert "LLM_MODEL" in warnings[0] and "LLM_API_KEY" in warnings[0] and ".env" in warnings[0]


def test_serve_on_a_busy_port_says_so_in_one_line_and_exits_2(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {**os.environ, **server_env(tmp_path, "http://127.0.0.1:9")}
        proc = subprocess.run(
            [PLANACT, "serve", "--port", str(port)],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=PROCESS_DEADLINE,
        )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and "Errno" not in proc.stderr
    assert proc.stderr.strip() == (
        f"planact: port {port} on 127.0.0.1 is already in use: stop the other program "
        "or choose --port."
    )


def test_the_end_line_of_a_stopped_run_says_it_was_stopped(
    tmp_path: Path, fake_model: FakeModelServer
) -> None:
    env = server_env(tmp_path, fake_model.base_url, RUNTIME="local")
    del env["LOG_LEVEL"]
    server = Server(tmp_path, env).start()
    try:
        fake_model.script({"stage": "auto_reply", "content": "Hello.", "hold": "never"})
        with (
            server.client() as c,
            c.stream("POST", "/api/agent/run", json={"goal": "hi", "mode": "chat"}) as resp,
        ):
            rid = resp.headers["x-run-id"]
            end = None
            for ev in iter_events(resp.iter_lines()):
                if ev.event == "end":
                    end = ev.json
                    break
                if ev.event == "message" and ev.json["meta"]["action_type"] == "question":
                    with server.client() as c2:
                        assert c2.post(f"/api/agent/runs/{rid}/stop").status_code == 202
        assert end is not None and end["status"] == "stopped"
        wait_for(lambda: f"run {rid} ended" in server.log.read_text(), what="the end line")
    finally:
        server.stop()
    (line,) = [x for x in server.log.read_text().splitlines() if f"run {rid} ended" in x]
    assert "status stopped" in line and line.endswith("; reason: stopped on request")


def test_a_wait_for_a_person_is_logged_as_a_wait_and_only_the_real_end_as_an_end(
    tmp_path: Path, fake_model: FakeModelServer
) -> None:
    env = server_env(tmp_path, fake_model.base_url, RUNTIME="local", APPROVAL_MODE="never")
    del env["LOG_LEVEL"]
    server = Server(tmp_path, env).start()
    try:
        fake_model.script(
            {"stage": "planning", "content": plan_reply("Mark")},
            {"stage": "thinking", "content": run(MARKER_COMMAND)},
            {"stage": "thinking", "content": finish("marked")},
        )
        ids = start_json(server, {"goal": "mark it", "approval": "risky"}).json()
        rid, cid = ids["run_id"], ids["conversation_id"]
        asked = pending(server, cid)
        wait_for(
            lambda: f"run {rid} waits for a person" in server.log.read_text(),
            what="the wait line",
        )
        assert f"run {rid} ended" not in server.log.read_text()
        assert decide(server, rid, asked["uuid"], {"decision": "approve"}).status_code == 200
        _, end = follow(server, rid)
        assert end is not None and end["status"] == "completed"
        wait_for(lambda: f"run {rid} ended" in server.log.read_text(), what="the end line")
    finally:
        server.stop()
    log = server.log.read_text()
    ours = [line.split("planact.runs", 1)[1] for line in log.splitlines() if f"run {rid} " in line]
    assert len(ours) == 4, ours
    assert f"run {rid} started: conversation {cid}, mode auto" in ours[0]
    assert f"run {rid} waits for a person (approval): conversation {cid}, 2 model calls" in ours[1]
    assert ours[1].endswith(" s so far")
    assert f"run {rid} goes on after a person's answer: conversation {cid}" in ours[2]
    assert f"run {rid} ended: conversation {cid}, status completed" in ours[3]
    assert "parked" not in log


@pytest.mark.parametrize(("level", "written"), [("INFO", True), ("WARNING", False)])
def test_access_lines_follow_the_log_level(
    tmp_path: Path, fake_model: FakeModelServer, level: str, written: bool
) -> None:
    """A request that changes something is an INFO access line: written at LOG_LEVEL=INFO,
    not made at all above it."""
    env = server_env(tmp_path, fake_model.base_url, LOG_LEVEL=level)
    server = Server(tmp_path, env).start()
    try:
        with server.client() as client:
            assert client.post("/api/conversations", json={"title": "t"}).status_code == 201
            assert client.get("/api/conversations/none").status_code == 404
    finally:
        server.stop()
    log = server.log.read_text()
    assert ('"POST /api/conversations HTTP/1.1" 201' in log) is written, log[-2000:]
    assert ('"GET /api/conversations/none HTTP/1.1" 404' in log) is written, log[-2000:]


def test_a_worker_freezes_its_start_up_heap(tmp_path: Path, fake_model: FakeModelServer) -> None:
    url = postgres_url()
    reset(url)
    env = server_env(tmp_path, fake_model.base_url, DATABASE_URL=url, LOG_LEVEL="DEBUG")
    worker = Worker(tmp_path, env, "heap").start()
    worker.stop()
    frozen = re.search(r"start-up heap: (\d+) objects frozen", worker.log.read_text())
    assert frozen is not None and int(frozen.group(1)) > 50_000, worker.log.read_text()[-3000:]


@pytest.mark.parametrize("command", ["serve", "worker"])
def test_an_unreachable_database_is_one_line_naming_it_and_a_non_zero_exit(
    tmp_path: Path, command: str
) -> None:
    """Before: exit 3 after a traceback from inside the server's start-up."""
    with socket.socket() as closed:  # a port nobody listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    url = f"postgresql+psycopg://planact:secret@127.0.0.1:{port}/planact"
    env = {**os.environ, **server_env(tmp_path, "http://127.0.0.1:9"), "DATABASE_URL": url}
    if command == "worker":
        env["EXECUTOR"] = "queue"
    args = [PLANACT, command] + (["--port", "0"] if command == "serve" else [])
    proc = subprocess.run(
        args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=PROCESS_DEADLINE
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    (line,) = [ln for ln in proc.stderr.splitlines() if "database" in ln]
    who = "planact" if command == "serve" else "planact worker"
    assert line.startswith(
        f"{who}: cannot reach the database at postgresql+psycopg://planact:***@127.0.0.1:{port}"
        "/planact (DATABASE_URL): "
    )
    assert "secret" not in proc.stderr and "refused" in line
