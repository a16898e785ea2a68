"""The LemonAI adapter after a rewind: its message list no longer replays what the rewind
took out of the history."""

from __future__ import annotations

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
