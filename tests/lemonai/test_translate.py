"""The pure parts of the adapter: message translation and the stream's mode logic."""

from __future__ import annotations

import json
from pathlib import Path

from backend.actions import builtin_registry
from backend.lemonai.routes import path_mapper
from backend.lemonai.stream import LemonStream
from backend.lemonai.translate import Translator, conversation, lemon_mode
from backend.messages.deltas import DeltaEvent
from backend.messages.message import Message
from backend.store.shapes import ConversationStatus, ConversationSummary

REGISTRY = builtin_registry()

WS = Path("/srv/ws/user_1/Conversation_c1")


def msg(kind: str, content: str = "", seq: int = 1, **kw: object) -> Message:
    m = Message.build(kind, content, **kw)  # type: ignore[arg-type]
    m.seq, m.run_id, m.conversation_id = seq, "r1", "c1"
    return m


def test_paths_become_absolute_server_paths() -> None:
    to_abs = path_mapper(WS)
    assert to_abs("a/b.py") == f"{WS}/a/b.py"
    assert to_abs("/workspace/a.py") == f"{WS}/a.py"
    assert to_abs("/workspace") == str(WS)
    assert to_abs("/elsewhere/x") == "/elsewhere/x"


def test_actions_thinking_and_aliases() -> None:
    tr = Translator(path_mapper(WS), REGISTRY)
    assert tr.feed(msg("thinking", "hmm")) == []
    running = tr.feed(msg("edit_file", "edit_file", status="running", filepath="x.py", uuid="u"))
    assert running[0]["meta"]["action_type"] == "write_code"
    assert running[0]["content"] == "x.py" and running[0]["meta"]["filepath"] == f"{WS}/x.py"
    done = tr.feed(msg("edit_file", "Replaced 1 occurrence.", seq=2, filepath="x.py", uuid="u"))
    assert done[0]["content"] == "Replaced 1 occurrence." and done[0]["id"] == 2
    skipped = tr.feed(msg("write_code", "Skipped: …", seq=3, status="failure", filepath="y"))
    assert skipped[0]["content"] == "Skipped: …"


def test_a_preview_shows_as_a_page_with_its_url_and_the_summary_lists_files_only() -> None:
    tr = Translator(path_mapper(WS), REGISTRY)
    url = "http://127.0.0.1:8001/p/tok/"
    entry = {"name": "app", "port": 8080, "path": "/", "url": url}
    tr.feed(msg("preview", "python3 app.py", status="running", uuid="p"))
    [done] = tr.feed(
        msg("preview", f"Preview 'app' is ready at {url}", seq=2, uuid="p", url=url, json=[entry])
    )
    assert done["meta"]["action_type"] == "browser"
    assert done["meta"]["url"] == url and url in done["content"]
    file = {"filepath": "app.py", "filename": "app.py", "url": "/api/files/c1/app.py"}
    [summary] = tr.feed(msg("finish_summery", "Done.", seq=3, json=[file, {"preview": entry}]))
    assert [f["relative_path"] for f in summary["meta"]["json"]] == ["app.py"]


def test_a_failed_task_waits_for_its_reason_or_says_it_failed() -> None:
    task = {"id": "t1", "title": "T", "description": "long", "status": "failed"}
    tr = Translator(path_mapper(WS), REGISTRY)
    assert tr.feed(msg("task", "T", status="failure", task_id="t1", json=[task])) == []
    out = tr.feed(msg("error", "Budget reached.", seq=2, status="failure"))
    assert [m["meta"]["action_type"] for m in out] == ["task", "error"]
    assert out[0]["meta"]["json"]["comments"] == "Budget reached."
    assert out[0]["meta"]["json"]["description"] == "T"
    alone = Translator(path_mapper(WS), REGISTRY)
    alone.feed(msg("task", "T", status="failure", task_id="t1", json=[task]))
    flushed = alone.flush()
    assert flushed[0]["meta"]["json"]["comments"] == "The task failed."


def test_auto_mode_holds_until_a_plan_then_sends_everything_in_order() -> None:
    s = LemonStream("auto", path_mapper(WS), REGISTRY)
    assert s.message(msg("question", "q", role="user")) == []
    assert s.message(msg("auto_reply", "On it.", seq=2)) == []
    plan = [{"id": "t1", "title": "T", "status": "pending"}]
    tokens = s.message(msg("plan", "1. T", seq=3, json=plan))
    assert tokens[0] == '__lemon_mode__{"mode": "agent"}'
    assert [json.loads(t)["meta"]["action_type"] for t in tokens[1:]] == [
        "question",
        "auto_reply",
        "plan",
    ]
    assert s.end() == []


def test_auto_mode_ending_without_an_answer_is_an_agent_stream() -> None:
    s = LemonStream("auto", path_mapper(WS), REGISTRY)
    s.message(msg("question", "q", role="user"))
    tokens = s.end()
    assert tokens[0] == '__lemon_mode__{"mode": "agent"}'
    assert json.loads(tokens[1])["meta"]["action_type"] == "question"


def test_chat_deltas_stream_and_the_final_answer_adds_only_the_rest() -> None:
    s = LemonStream("chat", path_mapper(WS), REGISTRY)
    assert s.message(msg("question", "q", role="user")) == ['__lemon_mode__{"mode": "chat"}']
    assert s.delta(DeltaEvent(uuid="x", action_type="thinking", text="no")) == []
    assert s.delta(DeltaEvent(uuid="x", action_type="auto_reply", text="\nPar")) == ["\nPar"]
    assert s.message(msg("auto_reply", "Paris.", seq=2)) == ["is."]
    assert s.end() == ['__lemon_out_end__{"message_id": "2", "pid": "1"}']


def test_modes_and_conversation_rows() -> None:
    assert [lemon_mode(m) for m in ("twins", "task", "auto", "chat", None, "", "x", 3)] == [
        "auto",
        "agent",
        "auto",
        "chat",
        "auto",
        "auto",
        None,
        None,
    ]
    row = conversation(_listed("failed", updated_at="u"), 1)
    assert (row["status"], row["update_at"], row["planact_status"]) == ("done", "u", "failed")
    assert conversation(_listed("running"), 1)["status"] == "running"
    assert conversation(_listed("idle"), 1)["status"] == "running"


def _listed(status: ConversationStatus, updated_at: str | None = None) -> ConversationSummary:
    return ConversationSummary(
        conversation_id="c", title="t", status=status, created_at=None, updated_at=updated_at
    )
