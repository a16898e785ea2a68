"""The delta coalescer: at most one batch per message per interval, in order, capped."""

from __future__ import annotations

import asyncio
from typing import Any

from backend.messages.deltas import Coalescer, DeltaEvent
from tests.support.deltas import collect, plain


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_first_piece_goes_out_at_once_and_later_ones_wait_for_the_slot() -> None:
    sent: list[dict[str, Any]] = []
    clock = Clock()
    co = Coalescer(collect(sent), interval=0.05, clock=clock)
    co.add("u1", "auto_reply", "Hel")  # no running loop: the first piece is sent now
    assert sent == [{"uuid": "u1", "action_type": "auto_reply", "text": "Hel"}]


async def test_pieces_within_one_interval_become_one_delta() -> None:
    sent: list[dict[str, Any]] = []
    got = asyncio.Event()

    def sink(payload: DeltaEvent) -> None:
        sent.append(plain(payload))
        if len(sent) == 2:
            got.set()

    co = Coalescer(sink, interval=0.05)
    co.add("u1", "auto_reply", "Hel")
    for piece in ("lo", ", ", "wor", "ld"):
        co.add("u1", "auto_reply", piece)
    assert [p["text"] for p in sent] == ["Hel"]  # the rest waits for the next slot
    await asyncio.wait_for(got.wait(), 5)
    assert [p["text"] for p in sent] == ["Hel", "lo, world"]
    assert co.sent == 2


async def test_rate_is_bounded_per_message_not_per_run() -> None:
    sent: list[dict[str, Any]] = []
    co = Coalescer(collect(sent), interval=10)  # a long interval: only the first goes out
    for i in range(100):
        co.add("a", "terminal_run", f"a{i}\n", "stdout")
        co.add("b", "terminal_run", f"b{i}\n", "stdout")
    assert [(p["uuid"], p["text"]) for p in sent] == [("a", "a0\n"), ("b", "b0\n")]
    co.flush("a")
    assert sent[-1]["uuid"] == "a"
    assert sent[-1]["text"] == "".join(f"a{i}\n" for i in range(1, 100))
    co.close()  # cancels the pending timer of b and sends its rest
    assert sent[-1]["text"] == "".join(f"b{i}\n" for i in range(1, 100))
    assert len(sent) == 4


async def test_streams_keep_their_order_and_name() -> None:
    sent: list[dict[str, Any]] = []
    co = Coalescer(collect(sent), interval=10)
    co.add("t", "terminal_run", "start\n", "stdout")
    co.add("t", "terminal_run", "one\n", "stdout")
    co.add("t", "terminal_run", "oops\n", "stderr")
    co.add("t", "terminal_run", "two\n", "stdout")
    co.forget("t")
    assert [(p.get("stream"), p["text"]) for p in sent] == [
        ("stdout", "start\n"),
        ("stdout", "one\n"),
        ("stderr", "oops\n"),
        ("stdout", "two\n"),
    ]
    co.forget("t")  # nothing pending: nothing sent
    assert len(sent) == 4


async def test_pending_text_is_capped_to_its_tail_with_a_note() -> None:
    sent: list[dict[str, Any]] = []
    co = Coalescer(collect(sent), interval=10, cap=100)
    co.add("t", "terminal_run", "first\n", "stdout")
    co.add("t", "terminal_run", "x" * 250, "stdout")
    co.add("t", "terminal_run", "END", "stdout")
    co.flush()
    last = sent[-1]["text"]
    assert last.startswith("[… 153 characters skipped …]\n")
    assert last.endswith("x" * 97 + "END")


async def test_nothing_is_kept_or_sent_when_nobody_listens() -> None:
    sent: list[dict[str, Any]] = []
    listening = False
    co = Coalescer(collect(sent), interval=0.05, wanted=lambda: listening)
    co.add("u", "auto_reply", "lost")
    co.flush()
    assert sent == []
    listening = True
    co.add("u", "auto_reply", "seen")
    assert [p["text"] for p in sent] == ["seen"]


async def test_whether_anyone_listens_is_asked_once_a_batch_not_once_a_piece() -> None:
    sent: list[dict[str, Any]] = []
    asked: list[int] = []

    def wanted() -> bool:
        asked.append(1)
        return True

    co = Coalescer(collect(sent), interval=10, wanted=wanted)
    for piece in ["first"] + [f" p{i}" for i in range(200)]:
        co.add("u", "auto_reply", piece)
    # the first piece went out at once (asked), the next started the waiting batch (asked)
    assert len(asked) == 2
    co.flush()
    assert "".join(p["text"] for p in sent) == "first" + "".join(f" p{i}" for i in range(200))


async def test_many_stream_switches_are_merged_per_stream() -> None:
    sent: list[dict[str, Any]] = []
    co = Coalescer(collect(sent), interval=10)
    co.add("t", "terminal_run", "0", "stdout")
    for i in range(40):
        co.add("t", "terminal_run", f"o{i} ", "stdout")
        co.add("t", "terminal_run", f"e{i} ", "stderr")
    co.flush()
    rest = sent[1:]
    assert len(rest) <= 17
    stdout = "".join(p["text"] for p in rest if p["stream"] == "stdout")
    stderr = "".join(p["text"] for p in rest if p["stream"] == "stderr")
    assert stdout.split() == [f"o{i}" for i in range(40)]
    assert stderr.split() == [f"e{i}" for i in range(40)]
