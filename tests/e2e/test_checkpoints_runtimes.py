"""Checkpoints in every runtime and on two replicas: the checkpoint store is invisible to
the sandbox (bubblewrap and Docker mount only the conversation's workspace), a rewind and a
fork are byte for byte in each, and a replica that did not run the conversation lists,
compares, rewinds and shares it (the index is in the store, the repository beside the
workspaces)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.agent.scripts import finish, plan_reply, run, write
from tests.e2e.server import Server, server_env, wait_for
from tests.fakellm import FakeModelServer
from tests.pg import postgres_url, reset
from tests.sse_client import collect
from tests.support.runtime import each_runtime, require_bwrap, require_docker

pytestmark = pytest.mark.e2e


def tree(root: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            out[rel] = ("link", str(path.readlink()))
        elif path.is_file():
            out[rel] = path.read_bytes()
    return out


def script(fake: FakeModelServer, store_dir: Path) -> None:
    probe = (
        f"if [ -e {store_dir} ] || ls -a .. | grep -q checkpoints; then echo SEEN; "
        "else echo UNSEEN; fi > seen.txt && printf '\\x00\\xfe' > raw.bin"
    )
    fake.script(
        {"stage": "planning", "content": plan_reply("Probe")},
        {"stage": "thinking", "content": write("notes.md", "# one\n")},
        {"stage": "thinking", "content": run(probe)},
        {"stage": "thinking", "content": finish("probed")},
    )


# what each runtime's sandbox needs on this host (the local runtime's: bubblewrap)
NEEDS: dict[str, Callable[[], object]] = {"docker": require_docker, "local": require_bwrap}


@pytest.mark.parametrize("runtime", each_runtime())
def test_the_sandbox_never_sees_the_checkpoints_and_rewind_and_fork_are_exact(
    tmp_path: Path, fake_model: FakeModelServer, runtime: str
) -> None:
    NEEDS.get(runtime, lambda: None)()
    store_dir = (tmp_path / "workspace" / ".checkpoints").resolve()
    script(fake_model, store_dir)
    server = Server(tmp_path, server_env(tmp_path, fake_model.base_url, RUNTIME=runtime)).start()
    try:
        messages, end, headers = server.run({"goal": "probe", "runtime": runtime})
        assert end["status"] == "completed", messages[-3:]
        cid = headers["x-conversation-id"]
        ws = tmp_path / "workspace" / "user_1" / f"Conversation_{cid}"
        assert (ws / "seen.txt").read_text() == "UNSEEN\n"
        assert store_dir.is_dir()
        at_end = tree(ws)
        with server.client() as c:
            cps = c.get(f"/api/conversations/{cid}/checkpoints").json()
            assert [cp["files_changed"] for cp in cps] == [1, 2, 0]
            assert c.post(
                f"/api/conversations/{cid}/rewind", json={"seq": cps[0]["seq"]}
            ).json() == {
                "seq": cps[0]["seq"],
                "files": 1,
            }
            assert tree(ws) == {"notes.md": b"# one\n"}
            forked = c.post(f"/api/conversations/{cid}/fork", json={"seq": cps[-1]["seq"]})
            assert forked.status_code == 201
        new = forked.json()["conversation_id"]
        assert tree(tmp_path / "workspace" / "user_1" / f"Conversation_{new}") == at_end
    finally:
        server.stop()


def test_another_replica_lists_compares_rewinds_and_shares_a_conversation(
    tmp_path: Path, fake_model: FakeModelServer
) -> None:
    url = postgres_url()
    reset(url)
    env = server_env(tmp_path, fake_model.base_url, DATABASE_URL=url)
    a = Server(tmp_path, env).start()
    b = Server(tmp_path, env).start()
    try:
        fake_model.script(
            {"stage": "planning", "content": plan_reply("Two")},
            {"stage": "thinking", "content": write("x.txt", "x1\n")},
            {"stage": "thinking", "content": write("x.txt", "x2\n")},
            {"stage": "thinking", "content": finish("two")},
        )
        messages, end, headers = a.run({"goal": "two writes"})
        assert end["status"] == "completed", messages[-3:]
        cid = headers["x-conversation-id"]
        ws = tmp_path / "workspace" / "user_1" / f"Conversation_{cid}"
        with b.client() as c:
            cps = c.get(f"/api/conversations/{cid}/checkpoints").json()
            assert len(cps) == 3
            diff = c.get(f"/api/conversations/{cid}/checkpoints/{cps[0]['seq']}/diff").json()
            (change,) = diff["files"]
            assert change["path"] == "x.txt" and "-x1\n+x2\n" in change["diff"]
            assert (
                c.post(f"/api/conversations/{cid}/rewind", json={"seq": cps[0]["seq"]}).status_code
                == 200
            )
            token = c.post(f"/api/conversations/{cid}/share").json()["token"]
        assert (ws / "x.txt").read_text() == "x1\n"
        with httpx.Client(base_url=a.url) as anon:  # the link read on the first replica
            got = anon.get(f"/api/shared/{token}/files/x.txt")
            assert got.status_code == 200 and got.content == b"x1\n"
        with a.client() as c:
            shown = c.get(f"/api/conversations/{cid}/messages").json()
            assert max(m["seq"] for m in shown) == cps[0]["seq"]
    finally:
        a.stop()
        b.stop()


def test_a_run_resumed_after_its_server_died_keeps_its_checkpoints(
    tmp_path: Path, fake_model: FakeModelServer
) -> None:
    """The owner is killed (-9) while its second model call is held; the next start takes
    the run over: the checkpoint taken before the crash is kept, the rest are added."""
    env = server_env(tmp_path, fake_model.base_url)
    first = Server(tmp_path, env).start()
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Resume")},
        {"stage": "thinking", "content": write("before.txt", "b\n")},
        {"stage": "thinking", "content": write("after.txt", "a\n"), "hold": "crash"},
        {"stage": "thinking", "content": write("after.txt", "a\n")},  # the call made again
        {"stage": "thinking", "content": finish("resumed")},
    )
    try:
        with first.client() as c:
            ids = c.post(
                "/api/agent/run", json={"goal": "resume"}, headers={"Accept": "application/json"}
            ).json()
        cid = ids["conversation_id"]
        wait_for(lambda: "crash" in fake_model.model.holds, what="the held model call")
        with first.client() as c:
            before = c.get(f"/api/conversations/{cid}/checkpoints").json()
        assert [cp["files_changed"] for cp in before] == [1]
        first.kill9()
    finally:
        first.stop()
    fake_model.release("crash")
    again = Server(tmp_path, env).start()
    try:
        with again.client() as c, c.stream("GET", f"/api/agent/runs/{ids['run_id']}/events") as r:
            _msgs, end = collect(r.iter_lines())
        assert end is not None and end["status"] == "completed"
        with again.client() as c:
            cps = c.get(f"/api/conversations/{cid}/checkpoints").json()
        assert cps[0] == before[0]
        assert [cp["label"] for cp in cps][-1] == "end of run"
        assert [cp["files_changed"] for cp in cps] == [1, 1, 0]
    finally:
        again.stop()
