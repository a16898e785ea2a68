"""A reader's command output is one stream: a catch-up and live deltas overlap, arrive in
any order, and the reader gets each character once, in place (backend/runs/catchup.py)."""

from __future__ import annotations

from typing import Any

from backend.agent.live import Live
from backend.messages.deltas import Coalescer, DeltaEvent
from backend.runs.catchup import OutputCursor
from backend.runs.notify import _split
from tests.support.deltas import collect, delta, plain


def out(text: str, offset: int, stream: str = "stdout", uuid: str = "u") -> DeltaEvent:
    return delta(uuid=uuid, action_type="terminal_run", stream=stream, text=text, offset=offset)


def admitted(cursor: OutputCursor, *deltas: DeltaEvent) -> list[tuple[str, int | None]]:
    got = [cursor.admit(p) for p in deltas]
    return [(p.text, p.offset) for p in got if p is not None]


def test_deltas_before_the_catch_up_are_dropped_and_overlaps_cut() -> None:
    cursor = OutputCursor()
    got = admitted(
        cursor,
        out("ne\n", 6),  # live, sent before the catch-up reached this reader: dropped
        out("first\nline\n", 0),  # the catch-up
        out("ne\nmore", 8),  # live: "ne\n" it already has
        out("more", 11),  # a duplicate
        out("oops\n", 0, "stderr"),
    )
    assert got == [("first\nline\n", 0), ("more", 11), ("oops\n", 0)]


def test_model_text_passes_and_a_gap_after_the_start_is_kept() -> None:
    cursor = OutputCursor()
    text = delta(uuid="m", action_type="auto_reply", text="Hi")
    assert cursor.admit(text) is text
    got = admitted(cursor, out("head", 0), out("tail", 100))  # a cut middle
    assert got == [("head", 0), ("tail", 100)]
    cursor.done("u")
    assert admitted(cursor, out("late", 104)) == []  # its final message passed


def test_live_catch_up_is_the_kept_head_and_tail_at_their_offsets() -> None:
    sent: list[dict[str, Any]] = []
    live = Live(collect(sent))
    live.command_output("u", "terminal_run")
    live.output("u", "stdout", "a" * 10)
    live.output("u", "stderr", "err")
    assert sent[0]["offset"] == 0
    live.output("u", "stdout", "b" * 5)
    [stdout, stderr] = map(plain, live.catch_up())
    assert (stdout["text"], stdout["offset"], stderr["text"]) == ("a" * 10 + "b" * 5, 0, "err")
    small = Live(collect(sent))
    small.command_output("v", "terminal_run")
    small.output("v", "stdout", "0123456789")
    small._output["v"]["stdout"].keep = 4  # keep 4 characters of tail from now on
    small.output("v", "stdout", "abcdefgh")  # 18 in all: head 10, 4 cut, tail "efgh"
    pieces = [(p.text, p.offset or 0) for p in small.catch_up()]
    assert pieces[-1] == ("efgh", 14)
    cursor = OutputCursor()
    assert admitted(cursor, *[out(t, o, uuid="v") for t, o in pieces])[-1] == ("efgh", 14)


def test_a_coalesced_batch_starts_at_its_first_pieces_offset() -> None:
    sent: list[dict[str, Any]] = []
    c = Coalescer(collect(sent), interval=60.0, cap=8)
    c.add("u", "terminal_run", "abc", "stdout", 0)  # sent at once
    c.add("u", "terminal_run", "defghijklmn", "stdout", 3)  # waits; only the last 8 kept
    c.flush()
    assert [(d["text"], d["offset"]) for d in sent] == [("abc", 0), ("ghijklmn", 6)]
    assert all("skipped" not in d["text"] for d in sent)  # the offset says it


def test_a_delta_split_for_notify_keeps_each_parts_offset() -> None:
    parts = _split(out("x" * 20_000, 500))
    assert len(parts) > 1
    at = 500
    for part in parts:
        assert part.offset == at
        at += len(part.text)
