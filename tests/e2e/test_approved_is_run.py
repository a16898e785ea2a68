"""What a person approves is what runs (docs/api.md, "Approvals"), black-box: a real
`planact serve`, the fake model over HTTP. The approval shows the whole command, or says
what it cut (how much, where) with the whole action in its meta.json; it carries the
action's digest; an answer naming another digest is refused (409, nothing changes); what
runs after approval is byte for byte the digested action."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.agent.scripts import finish, plan_reply, run, write
from tests.e2e.cluster import follow, start_json
from tests.e2e.server import Server, server_env
from tests.e2e.waiting import decide, finals, pending
from tests.fakellm import FakeModelServer

pytestmark = pytest.mark.e2e

# the command of the report: a harmless head, its tail pushed off the card by spaces and
# blank lines
PADDED = "echo safe" + " " * 400 + "; touch HIDDEN1" + "\n" * 80 + "touch HIDDEN2"
BIG_LINES = 40_000


@pytest.fixture
def server(tmp_path: Path, fake_model: FakeModelServer) -> Iterator[Server]:
    s = Server(tmp_path, server_env(tmp_path, fake_model.base_url)).start()
    try:
        yield s
    finally:
        s.stop()


def digest(item: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of action type + params, as docs/api.md defines it."""
    doc = {"action_type": item["action_type"], "params": item["params"]}
    raw = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def workspace_file(tmp_path: Path, cid: str, name: str) -> list[Path]:
    return [p for p in (tmp_path / "workspace").rglob(name) if cid in str(p)]


def test_a_padded_command_is_shown_whole_and_what_runs_is_what_was_shown(
    tmp_path: Path, server: Server, fake_model: FakeModelServer
) -> None:
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Run it")},
        {"stage": "thinking", "content": run(PADDED)},
        {"stage": "thinking", "content": finish("ran")},
    )
    ids = start_json(server, {"goal": "run it", "approval": "risky"}).json()
    rid, cid = ids["run_id"], ids["conversation_id"]
    asked = pending(server, cid)
    (item,) = asked["meta"]["json"]
    assert item["params"]["command"] == PADDED
    assert asked["content"] == PADDED  # whole: nothing cut, nothing collapsed
    assert item["shown"] == {"whole": True, "note": "", "lines": 81, "chars": len(PADDED)}
    assert item["digest"] == digest(item)
    assert decide(server, rid, asked["uuid"], {"decision": "approve", "digest": item["digest"]})
    msgs, end = follow(server, rid)
    assert end is not None and end["status"] == "completed"
    assert workspace_file(tmp_path, cid, "HIDDEN1") and workspace_file(tmp_path, cid, "HIDDEN2")
    ran = [
        m for m in msgs if m["meta"]["action_type"] == "terminal_run" and m["status"] != "running"
    ]
    assert [m["meta"]["json"][0]["command"] for m in ran] == [PADDED]


def test_a_40000_line_file_says_what_it_cut_and_the_file_written_is_the_one_digested(
    tmp_path: Path, server: Server, fake_model: FakeModelServer
) -> None:
    content = "".join(f"line {i}\n" for i in range(1, BIG_LINES + 1))
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Write it")},
        {"stage": "thinking", "content": write("big.txt", content)},
        {"stage": "thinking", "content": finish("written")},
    )
    ids = start_json(server, {"goal": "write it", "approval": "always"}).json()
    rid, cid = ids["run_id"], ids["conversation_id"]
    asked = pending(server, cid)
    (item,) = asked["meta"]["json"]
    assert item["params"]["content"] == content  # the whole change, one click away
    shown = item["shown"]
    assert shown["whole"] is False and shown["lines"] == BIG_LINES
    # it says how much and where, in the content and in meta
    note = shown["note"]
    assert note.startswith("Cut after line ") and "more lines" in note
    assert asked["content"].endswith(f"[… {note}]\n")
    body = asked["content"][: -len(f"[… {note}]\n")]
    assert body.endswith("\n")  # cut at a line's end, never mid-line
    last = body.rstrip("\n").rsplit("\n", 1)[-1]
    assert last.startswith("+line ") and last[len("+line ") :].isdigit()
    shown_lines = int(note.split()[3].rstrip(":").replace(",", ""))
    assert body.count("\n") == shown_lines
    more = int(note.split(": ", 1)[1].split()[0].replace(",", ""))
    assert shown_lines - 3 + more == BIG_LINES  # the diff's 3 header lines, then every line
    assert item["digest"] == digest(item)
    got = decide(server, rid, asked["uuid"], {"decision": "approve", "digest": item["digest"]})
    assert got.status_code == 200
    _, end = follow(server, rid)
    assert end is not None and end["status"] == "completed"
    (written,) = workspace_file(tmp_path, cid, "big.txt")
    assert written.read_bytes() == item["params"]["content"].encode()


def test_an_edit_of_a_file_too_big_to_compare_says_so(
    tmp_path: Path, server: Server, fake_model: FakeModelServer
) -> None:
    with server.client() as c:
        cid = c.post("/api/conversations", json={}).json()["conversation_id"]
        big = b"x" * 2_000_001 + b"\n"
        up = c.post(f"/api/conversations/{cid}/files", files={"file": ("huge.txt", big)})
        assert up.status_code == 201
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Replace it")},
        {"stage": "thinking", "content": write("huge.txt", "small\n")},
        {"stage": "thinking", "content": finish("replaced")},
    )
    body = {"goal": "replace it", "approval": "always", "conversation_id": cid}
    rid = start_json(server, body).json()["run_id"]
    asked = pending(server, cid)
    (item,) = asked["meta"]["json"]
    assert item["shown"]["whole"] is False
    assert "not compared" in item["shown"]["note"] and "2,000,000 bytes" in item["shown"]["note"]
    assert asked["content"].startswith("[the file on disk is over 2,000,000 bytes")
    assert "+small\n" in asked["content"]
    assert decide(server, rid, asked["uuid"], {"decision": "approve"}).status_code == 200
    _, end = follow(server, rid)
    assert end is not None and end["status"] == "completed"
    (written,) = workspace_file(tmp_path, cid, "huge.txt")
    assert written.read_bytes() == b"small\n"


def test_an_answer_for_another_digest_is_refused_and_changes_nothing(
    tmp_path: Path, server: Server, fake_model: FakeModelServer
) -> None:
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Mark")},
        {"stage": "thinking", "content": run("touch MARK")},
        {"stage": "thinking", "content": finish("marked")},
    )
    ids = start_json(server, {"goal": "mark it", "approval": "risky"}).json()
    rid, cid = ids["run_id"], ids["conversation_id"]
    asked = pending(server, cid)
    (item,) = asked["meta"]["json"]
    other = "sha256:" + "0" * 64
    for bad, status in ((other, 409), ("", 409), (7, 400), (["x"], 400)):
        got = decide(server, rid, asked["uuid"], {"decision": "approve", "digest": bad})
        assert got.status_code == status, bad
        assert got.json()["error"]["message"]
    conflict = decide(server, rid, asked["uuid"], {"decision": "approve", "digest": other})
    assert "another action" in conflict.json()["error"]["message"]
    assert not workspace_file(tmp_path, cid, "MARK")
    assert pending(server, cid)["uuid"] == asked["uuid"]  # still waiting
    got = decide(server, rid, asked["uuid"], {"decision": "approve", "digest": item["digest"]})
    assert got.status_code == 200
    msgs, end = follow(server, rid)
    assert end is not None and end["status"] == "completed"
    assert workspace_file(tmp_path, cid, "MARK")
    assert [m["status"] for m in finals(msgs, asked["uuid"])] == ["success"]
