"""The LemonAI adapter after a rewind: its message list no longer replays what the rewind
took out of the history."""

from __future__ import annotations

import base64

from backend.config import Settings
from backend.llm.testing import ScriptedLLM
from tests.agent.scripts import finish, plan_reply, write
from tests.sse_client import collect
from tests.support.lemonai import lemon_client


def test_the_lemonai_message_list_leaves_out_what_was_rewound_away(settings: Settings) -> None:
    llm = ScriptedLLM(
        [
            ("planning", plan_reply("Two")),
            ("thinking", write("a.txt", "a\n")),
            ("thinking", write("b.txt", "b\n")),
            ("thinking", finish("both")),
        ]
    )
    with lemon_client(settings, llm) as client:
        with client.stream(
            "POST", "/api/agent/run", json={"goal": "two files", "mode": "agent"}
        ) as resp:
            messages, end = collect(resp.iter_lines())
        assert end is not None and end["status"] == "completed", llm.errors
        cid = messages[0]["conversation_id"]
        first = client.get(f"/api/conversations/{cid}/checkpoints").json()[0]["seq"]
        listed = client.get("/lemonai/api/message/list", params={"conversation_id": cid})
        before = listed.json()["data"]
        assert (
            client.post(f"/api/conversations/{cid}/rewind", json={"seq": first}).status_code == 200
        )
        after = client.get("/lemonai/api/message/list", params={"conversation_id": cid}).json()[
            "data"
        ]
        kept = [m for m in messages if m["seq"] <= first]
        assert 0 < len(after) < len(before)
        assert "b.txt" not in str(after) and "b.txt" in str(before)
        assert len(kept) < len(messages)


def test_a_lemonai_run_is_refused_while_a_rewind_puts_files_back(settings: Settings) -> None:
    llm = ScriptedLLM(
        [
            ("planning", plan_reply("One")),
            ("thinking", write("a.txt", "a\n")),
            ("thinking", finish("made")),
        ]
    )
    with lemon_client(settings, llm) as client:
        with client.stream(
            "POST", "/api/agent/run", json={"goal": "a file", "mode": "agent"}
        ) as resp:
            messages, _end = collect(resp.iter_lines())
        cid = messages[0]["conversation_id"]
        store = client.app.state.store  # type: ignore[attr-defined]
        assert client.portal is not None
        client.portal.call(store.rewind_history, cid, messages[-1]["seq"])
        refused = client.post(
            "/lemonai/api/agent/run",
            json={"question": "again", "conversation_id": cid},
            headers={"Accept": "text/event-stream"},
        )
        assert refused.status_code == 409
        said = [
            base64.b64decode(line.removeprefix("data: ")).decode()
            for line in refused.text.splitlines()
            if line.startswith("data: ")
        ]
        assert any("rewind" in token for token in said), said
        client.portal.call(store.restored, cid)
        assert client.portal.call(store.running_run_of, cid) is None
