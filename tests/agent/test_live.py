"""Live: open running messages and their partners; kept output of a command cut short."""

from __future__ import annotations

import asyncio
from typing import Any

from backend.agent.live import Live
from backend.messages.deltas import DeltaEvent
from backend.messages.message import Message
from tests.support.deltas import collect


async def test_live_output_is_kept_for_the_closing_text_and_flushed_before_the_final() -> None:
    sent: list[dict[str, Any]] = []
    live = Live(collect(sent))
    cmd = Message.build(
        "terminal_run", "make", status="running", task_id="t1", meta_content="terminal_run: make"
    )
    live.published(cmd)
    on_output = live.command_output(cmd.uuid, cmd.meta.action_type)
    on_output("stdout", b"building\n")
    on_output("stderr", b"warning: x\n")
    on_output("stdout", "linking \u00e9".encode()[:-1])  # a character cut in two
    on_output("stdout", "linking \u00e9".encode()[-1:] + b"\n")
    assert [p["text"] for p in sent] == ["building\n"]  # the rest waits for its slot
    assert live.closing_text(cmd.uuid, "Stopped before it finished.") == (
        "Stopped before it finished.\nOutput before that:\nstdout:\nbuilding\nlinking \u00e9\n"
        "\nstderr:\nwarning: x\n"
    )
    assert live.closing_text("other", "Interrupted.") == "Interrupted."
    final = Message.build("terminal_run", "Exit code: 0", uuid=cmd.uuid, status="success")
    live.published(final)  # its pending deltas go first, and what was kept goes
    assert [p["text"] for p in sent][1:] == ["warning: x\n", "linking \u00e9\n"]
    assert [p.get("stream") for p in sent] == ["stdout", "stderr", "stdout"]
    assert live.closing_text(cmd.uuid, "Stopped.") == "Stopped."


async def test_publisher_gets_every_delta_in_order_through_the_outbox() -> None:
    got: list[str] = []

    async def publish(payload: DeltaEvent) -> None:
        got.append(payload.text)

    live = Live(publish=publish)
    live.text("u", "auto_reply", "a")
    live.text("u", "auto_reply", "b")
    live.text("u", "auto_reply", "c")
    live.published(Message.build("auto_reply", "abc", uuid="u"))
    await live.drain()
    assert got == ["a", "bc"]


async def test_prose_callback_streams_only_the_words() -> None:
    sent: list[dict[str, Any]] = []
    live = Live(collect(sent))
    on_delta = live.prose("u1", "thinking")
    for piece in ["I'll", " fix it", ".\n<terminal", "_run><command>ls</command>"]:
        on_delta("text", piece)
    on_delta("reasoning", "secret thoughts")
    assert live.deltas is not None
    live.deltas.flush()
    text = "".join(p["text"] for p in sent)
    assert text == "I'll fix it.\n"
    assert all(p["action_type"] == "thinking" and p["uuid"] == "u1" for p in sent)


async def test_delta_text_never_carries_lone_surrogates_or_nul() -> None:
    sent: list[dict[str, Any]] = []
    live = Live(collect(sent))
    live.text("u", "auto_reply", "caf\udce9 \x00 ok")
    assert sent[0]["text"] == "caf\ufffd \ufffd ok"
    sent[0]["text"].encode("utf-8")


async def test_deltas_go_at_once_when_the_publisher_can_and_in_order_when_it_cannot() -> None:
    got: list[str] = []
    accept = True

    async def publish(payload: DeltaEvent) -> None:
        got.append(payload.text)

    def publish_now(payload: DeltaEvent) -> bool:
        if accept:
            got.append(payload.text)
        return accept

    live = Live(publish=publish, publish_now=publish_now)
    live.text("u", "auto_reply", "a")
    assert got == ["a"]  # delivered within the call: no task, no await
    accept = False  # e.g. the delta must cross processes: through the outbox
    live.published(Message.build("auto_reply", "a", uuid="u"))
    live.text("v", "auto_reply", "b")
    assert got == ["a"]
    accept = True
    live.text("w", "auto_reply", "c")  # "b" is still queued: "c" waits behind it
    assert got == ["a"]
    await live.drain()
    assert got == ["a", "b", "c"]
    live.text("x", "auto_reply", "d")  # nothing queued any more: at once again
    assert got == ["a", "b", "c", "d"]


async def test_a_delta_waits_behind_one_still_being_published() -> None:
    got: list[str] = []
    fast: list[str] = []
    started, release = asyncio.Event(), asyncio.Event()

    async def publish(payload: DeltaEvent) -> None:
        got.append(payload.text)
        started.set()
        await release.wait()  # e.g. a NOTIFY under way

    take_now = False

    def publish_now(payload: DeltaEvent) -> bool:
        if take_now:
            fast.append(payload.text)
        return take_now

    live = Live(publish=publish, publish_now=publish_now)
    live.text("u", "auto_reply", "a")  # declined at once: queued, a task sends it
    await started.wait()  # "a" is taken from the outbox, its publish waits
    take_now = True  # the fast path would take the next one
    live.published(Message.build("auto_reply", "a", uuid="u"))
    live.text("v", "auto_reply", "b")
    assert fast == []  # "b" does not overtake "a": it is queued behind it
    release.set()
    await live.drain()
    assert got == ["a", "b"]
