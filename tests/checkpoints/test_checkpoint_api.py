"""Checkpoints through the API with a scripted model and the real local runtime: a run that
writes, edits, deletes and makes a binary file and a symlink; list, compare, rewind (and
redo), fork, and what the model is sent afterwards."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path
from typing import Any

from starlette.testclient import TestClient

from backend.config import Settings
from backend.llm.testing import ScriptedLLM
from backend.workspace import workspace_path
from tests.agent.scripts import finish, plan_reply, run, write
from tests.support.asgi import client_for, post_run

BINARY = bytes(range(256)) * 4


def edit(path: str, old: str, new: str) -> str:
    return (
        f"<edit_file><path>{path}</path><old_str>{old}</old_str>"
        f"<new_str>{new}</new_str></edit_file>"
    )


def first_run_script() -> list[tuple[str, str]]:
    return [
        ("planning", plan_reply("Make files")),
        ("thinking", write("a.txt", "one\ntwo\n")),
        ("thinking", write("gone.txt", "soon gone\n")),
        ("thinking", edit("a.txt", "two", "TWO")),
        (
            "thinking",
            run(
                "rm gone.txt && python3 -c "
                '"import sys; sys.stdout.buffer.write(bytes(range(256))*4)"'
                " > bin.dat && mkdir -p d && ln -s ../a.txt d/link"
            ),
        ),
        ("thinking", finish("made")),
    ]


def files_of(root: Path) -> dict[str, Any]:
    """Every file (bytes) and link (target) under ``root``."""
    out: dict[str, Any] = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            out[rel] = ("link", str(path.readlink()))
        elif path.is_file():
            out[rel] = path.read_bytes()
    return out


def workspace(settings: Settings, cid: str) -> Path:
    return workspace_path(settings.workspace_dir.resolve(), "1", cid)


def zipped(client: TestClient, cid: str) -> dict[str, bytes]:
    resp = client.get(f"/api/conversations/{cid}/files.zip")
    assert resp.status_code == 200
    with zipfile.ZipFile(io.BytesIO(resp.content)) as z:
        return {n: z.read(n) for n in z.namelist() if not n.endswith("/")}


def checkpoints(client: TestClient, cid: str) -> list[dict[str, Any]]:
    resp = client.get(f"/api/conversations/{cid}/checkpoints")
    assert resp.status_code == 200
    return list(resp.json())


def test_a_run_is_checkpointed_after_each_change_and_at_its_end(
    settings: Settings, tmp_path: Path
) -> None:
    llm = ScriptedLLM(first_run_script())
    with client_for(settings, llm) as client:
        messages, end, _ = post_run(client, {"goal": "make files", "mode": "agent"})
        assert end["status"] == "completed", llm.errors
        assert llm.errors == []
        cid = messages[0]["conversation_id"]
        cps = checkpoints(client, cid)
        labels = [c["label"] for c in cps]
        assert len(cps) == 5, labels  # four actions that changed files, the run's end
        assert labels[-1] == "end of run"
        assert cps[-1]["seq"] == messages[-1]["seq"]
        results = {
            m["seq"]: m
            for m in messages
            if m["status"] == "success"
            and m["meta"]["action_type"] in ("write_code", "edit_file", "terminal_run")
        }
        assert [c["seq"] for c in cps[:-1]] == sorted(results)
        # a.txt; gone.txt; a.txt edited; gone.txt removed, bin.dat and d/link added
        assert [c["files_changed"] for c in cps] == [1, 1, 1, 3, 0]

        diff = client.get(f"/api/conversations/{cid}/checkpoints/{cps[0]['seq']}/diff").json()
        assert diff["from"] == cps[0]["seq"] and diff["to"] is None
        changes = {f["path"]: (f["change"], f["kind"]) for f in diff["files"]}
        assert changes == {
            "a.txt": ("changed", "text"),
            "bin.dat": ("added", "binary"),
            "d/link": ("added", "link"),
        }
        text = next(f for f in diff["files"] if f["path"] == "a.txt")["diff"]
        assert "-two\n" in text and "+TWO\n" in text
        between = client.get(
            f"/api/conversations/{cid}/checkpoints/{cps[0]['seq']}/diff",
            params={"to": cps[1]["seq"]},
        ).json()
        assert [(f["path"], f["change"]) for f in between["files"]] == [("gone.txt", "added")]
        assert client.get(f"/api/conversations/{cid}/checkpoints/99999/diff").status_code == 404
        assert (
            client.get(
                f"/api/conversations/{cid}/checkpoints/{cps[0]['seq']}/diff", params={"to": 4242}
            ).status_code
            == 404
        )


def test_rewind_restores_byte_for_byte_hides_later_messages_and_redoes(
    settings: Settings, tmp_path: Path
) -> None:
    script = [
        *first_run_script(),
        ("planning", plan_reply("Again")),
        ("thinking", finish("nothing")),
    ]
    llm = ScriptedLLM(script)
    with client_for(settings, llm) as client:
        messages, _end, _ = post_run(client, {"goal": "make files", "mode": "agent"})
        cid = messages[0]["conversation_id"]
        ws = workspace(settings, cid)
        cps = checkpoints(client, cid)
        at_end = files_of(ws)
        assert at_end["bin.dat"] == BINARY and at_end["d/link"] == ("link", "../a.txt")

        second = cps[1]["seq"]  # a.txt (one, two) and gone.txt
        resp = client.post(f"/api/conversations/{cid}/rewind", json={"seq": second})
        assert resp.status_code == 200, resp.text
        assert resp.json() == {"seq": second, "files": 2}
        assert files_of(ws) == {"a.txt": b"one\ntwo\n", "gone.txt": b"soon gone\n"}
        assert not (ws / "d").exists()
        # the downloads and the zip serve what the checkpoint holds
        assert client.get(f"/api/files/{cid}/a.txt").content == b"one\ntwo\n"
        assert client.get(f"/api/files/{cid}/bin.dat").status_code == 404
        assert zipped(client, cid) == {"a.txt": b"one\ntwo\n", "gone.txt": b"soon gone\n"}
        shown = client.get(f"/api/conversations/{cid}/messages").json()
        assert max(m["seq"] for m in shown) == second
        every = client.get(f"/api/conversations/{cid}/messages", params={"all": 1}).json()
        assert [m["seq"] for m in every] == [m["seq"] for m in messages]
        assert (
            client.get(f"/api/conversations/{cid}/messages", params={"all": 2}).status_code == 400
        )
        # the rewound checkpoints are still listed: a rewind to a later one redoes
        assert [c["seq"] for c in checkpoints(client, cid)] == [c["seq"] for c in cps]
        resp = client.post(f"/api/conversations/{cid}/rewind", json={"seq": cps[-1]["seq"]})
        assert resp.status_code == 200
        assert files_of(ws) == at_end
        assert len(client.get(f"/api/conversations/{cid}/messages").json()) == len(messages)

        # back again, then a new run: it goes on from there, without what was rewound away
        client.post(f"/api/conversations/{cid}/rewind", json={"seq": second})
        messages2, end2, _ = post_run(
            client, {"goal": "again", "mode": "agent", "conversation_id": cid}
        )
        assert end2["status"] == "completed", llm.errors
        planning = next(c for c in reversed(llm.calls) if c.stage == "planning")
        answer = messages[-1]["content"]  # the rewound run's answer
        assert answer and answer not in str(planning.messages)
        assert "make files" in str(planning.messages)  # its goal was before the checkpoint
        shown = client.get(f"/api/conversations/{cid}/messages").json()
        seqs = [m["seq"] for m in shown]
        assert seqs == [m["seq"] for m in messages if m["seq"] <= second] + [
            m["seq"] for m in messages2
        ]
        # no redo past a new run: the rewound checkpoints are gone
        listed = [c["seq"] for c in checkpoints(client, cid)]
        assert cps[-1]["seq"] not in listed and second in listed
        resp = client.post(f"/api/conversations/{cid}/rewind", json={"seq": cps[-1]["seq"]})
        assert resp.status_code == 404


def test_rewind_and_fork_refuse_what_does_not_exist(settings: Settings) -> None:
    llm = ScriptedLLM(first_run_script())
    with client_for(settings, llm) as client:
        messages, _end, _ = post_run(client, {"goal": "make files", "mode": "agent"})
        cid = messages[0]["conversation_id"]
        for route in ("rewind", "fork"):
            assert (
                client.post(f"/api/conversations/{cid}/{route}", json={"seq": 1}).status_code == 404
            )
            assert (
                client.post(f"/api/conversations/nope/{route}", json={"seq": 1}).status_code == 404
            )
            bad = client.post(f"/api/conversations/{cid}/{route}", json={"seq": "x"})
            assert bad.status_code == 400
            assert client.post(f"/api/conversations/{cid}/{route}", json={}).status_code == 400


def test_fork_is_a_new_conversation_with_that_checkpoint_and_history(settings: Settings) -> None:
    llm = ScriptedLLM(
        [
            *first_run_script(),
            ("planning", plan_reply("In the fork")),
            ("thinking", write("fork.txt", "forked\n")),
            ("thinking", finish("ok")),
        ]
    )
    with client_for(settings, llm) as client:
        messages, _end, _ = post_run(client, {"goal": "make files", "mode": "agent"})
        cid = messages[0]["conversation_id"]
        ws = workspace(settings, cid)
        original = files_of(ws)
        cps = checkpoints(client, cid)
        at = cps[2]["seq"]  # a.txt edited, gone.txt still there
        resp = client.post(f"/api/conversations/{cid}/fork", json={"seq": at})
        assert resp.status_code == 201, resp.text
        new = resp.json()["conversation_id"]
        assert new != cid
        assert files_of(workspace(settings, new)) == {
            "a.txt": b"one\nTWO\n",
            "gone.txt": b"soon gone\n",
        }
        assert files_of(ws) == original
        forked = client.get(f"/api/conversations/{new}/messages").json()
        assert [m["seq"] for m in forked] == [m["seq"] for m in messages if m["seq"] <= at]
        assert [c["seq"] for c in checkpoints(client, new)] == [c["seq"] for c in cps[:3]]
        assert zipped(client, new) == {"a.txt": b"one\nTWO\n", "gone.txt": b"soon gone\n"}
        assert client.get(f"/api/files/{new}/a.txt").content == b"one\nTWO\n"
        # a run in the fork works like any other, and leaves the original alone
        _m, end, _ = post_run(client, {"goal": "go on", "mode": "agent", "conversation_id": new})
        assert end["status"] == "completed", llm.errors
        assert files_of(workspace(settings, new))["fork.txt"] == b"forked\n"
        assert files_of(ws) == original
        assert len(client.get(f"/api/conversations/{cid}/messages").json()) == len(messages)


def test_no_run_starts_on_files_a_rewind_is_still_putting_back(settings: Settings) -> None:
    llm = ScriptedLLM(
        [
            *first_run_script(),
            ("planning", plan_reply("Again")),
            ("thinking", finish("ok")),
        ]
    )
    with client_for(settings, llm) as client:
        messages, _end, _ = post_run(client, {"goal": "make files", "mode": "agent"})
        cid = messages[0]["conversation_id"]
        store = client.app.state.store  # type: ignore[attr-defined]
        # a rewind (on this or another replica) holds the conversation while it restores
        at = checkpoints(client, cid)[0]["seq"]
        assert client.portal is not None
        client.portal.call(store.rewind_history, cid, at)
        body = {"goal": "go on", "mode": "agent", "conversation_id": cid}
        refused = client.post("/api/agent/run", json=body)
        assert refused.status_code == 409
        assert "rewind" in refused.json()["error"]["message"]
        again = client.post(f"/api/conversations/{cid}/rewind", json={"seq": at})
        assert again.status_code == 409
        assert "Another rewind" in again.json()["error"]["message"]
        client.portal.call(store.restored, cid)
        _m, end, _ = post_run(client, body)
        assert end["status"] == "completed", llm.errors
