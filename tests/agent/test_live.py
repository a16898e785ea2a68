"""Live: open running messages and their partners; kept output of a command cut short."""

from __future__ import annotations

from typing import Any

from backend.agent.live import Live
from backend.messages.message import Message


async def test_partners_close_innermost_first_and_keep_live_output() -> None:
    sent: list[dict[str, Any]] = []
    live = Live(sent.append)
    task = Message.build(
        "task",
        "Run it",
        status="running",
        task_id="t1",
        json=[{"id": "t1", "title": "Run it", "status": "running"}],
    )
    cmd = Message.build(
        "terminal_run", "make", status="running", task_id="t1", meta_content="terminal_run: make"
    )
    done = Message.build("write_code", "Writing a", status="running", task_id="t1")
    for m in (task, cmd, done):
        live.published(m)
    live.published(Message.build("write_code", "ok", uuid=done.uuid, task_id="t1"))
    live.output(cmd.uuid, "stdout", "building\n")
    live.output(cmd.uuid, "stderr", "warning: x\n")
    live.output(cmd.uuid, "stdout", "linking\n")
    assert [p["text"] for p in sent] == ["building\n"]  # the rest waits for its slot
    partners = live.partners("Stopped.")
    assert [(p.meta.action_type, p.uuid) for p in partners] == [
        ("terminal_run", cmd.uuid),
        ("task", task.uuid),
    ]
    assert all(p.status == "failure" for p in partners)
    assert partners[0].content == (
        "Stopped.\nOutput before that:\nstdout:\nbuilding\nlinking\n\nstderr:\nwarning: x\n"
    )
    assert partners[0].meta.content == "terminal_run: make"
    assert partners[1].content == "Run it"
    assert partners[1].meta.json_[0]["status"] == "failed"
    live.published(partners[0])  # publishing a partner flushes and closes
    assert [p["text"] for p in sent][-2:] == ["warning: x\n", "linking\n"]
    live.published(partners[1])
    assert live.open_messages() == []


def test_task_messages_pair_by_task_id_not_uuid() -> None:
    live = Live()
    live.published(Message.build("task", "A", status="running", task_id="t1"))
    live.published(Message.build("task", "A", status="success", task_id="t1"))
    assert live.open_messages() == []


async def test_prose_callback_streams_only_the_words() -> None:
    sent: list[dict[str, Any]] = []
    live = Live(sent.append)
    on_delta = live.prose("u1", "thinking")
    for piece in ["I'll", " fix it", ".\n<terminal", "_run><command>ls</command>"]:
        on_delta("text", piece)
    on_delta("reasoning", "secret thoughts")
    assert live.deltas is not None
    live.deltas.flush()
    text = "".join(p["text"] for p in sent)
    assert text == "I'll fix it.\n"
    assert all(p["action_type"] == "thinking" and p["uuid"] == "u1" for p in sent)
