from __future__ import annotations

import asyncio
import json

from backend.messages.bus import Bus
from backend.messages.message import Message
from tests.shapes import MESSAGE_KEYS, META_KEYS


def test_message_has_the_vue_shape() -> None:
    msg = Message.build("plan", "1. x", json=[{"id": "t1"}], task_id=None)
    data = json.loads(msg.to_json())
    assert list(data) == MESSAGE_KEYS
    assert list(data["meta"]) == META_KEYS
    assert data["meta"] == {
        "pid": "",
        "task_id": None,
        "action_type": "plan",
        "filepath": "",
        "url": "",
        "json": [{"id": "t1"}],
        "content": "",
        "is_active": True,
    }
    assert data["role"] == "assistant" and data["status"] == "success"
    assert isinstance(data["timestamp"], int) and data["timestamp"] > 1_700_000_000_000
    assert Message.from_dict(data) == msg


def test_running_and_final_share_a_uuid_when_asked() -> None:
    a = Message.build("write_code", "Writing a", status="running", uuid="u1")
    b = Message.build("write_code", "done", uuid="u1")
    assert a.uuid == b.uuid == "u1"
    assert Message.build("x").uuid != Message.build("x").uuid


def test_json_is_one_line_and_keeps_unicode() -> None:
    text = Message.build("auto_reply", "line1\nline2 ✓ <b>&").to_json()
    assert "\n" not in text and "✓" in text


async def test_bus_wakes_subscribers_and_times_out() -> None:
    bus = Bus()
    event = bus.subscribe("r")
    assert await bus.wait("r", event, 0.01) is False
    waiter = asyncio.create_task(bus.wait("r", event, 5))
    await asyncio.sleep(0)
    bus.notify("r")
    assert await waiter is True
    bus.notify("r")  # a notify before waiting is not lost
    assert await bus.wait("r", event, 0.01) is True
    bus.unsubscribe("r", event)
    bus.notify("r")
    assert not event.is_set()


def test_bus_keeps_a_live_runs_stored_messages_until_it_ends() -> None:
    bus = Bus()
    assert bus.stored_after("r", 0) is None  # not a run of this process
    bus.mark_live("r")
    event = bus.subscribe("r")
    stored = []
    for seq in (4, 5, 6):
        msg = Message.build("x", str(seq))
        msg.seq = seq
        stored.append(msg)
        bus.publish("r", msg)
    assert event.is_set()
    assert bus.stored_after("r", 0) == stored
    assert bus.stored_after("r", 5) == stored[2:]
    assert bus.stored_after("r", 6) == []
    bus.mark_done("r")
    assert bus.stored_after("r", 0) is None and not bus.is_live("r")


def test_bus_keeps_an_ended_runs_messages_and_status_while_it_is_followed() -> None:
    bus = Bus()
    bus.mark_live("r")
    first, second = bus.subscribe("r"), bus.subscribe("r")
    msg = Message.build("x", "last")
    msg.seq = 3
    bus.publish("r", msg)
    bus.mark_done("r", "completed")
    assert not bus.is_live("r")  # it left this process
    assert bus.ended("r") == "completed" and bus.stored_after("r", 0) == [msg]
    bus.unsubscribe("r", first)
    assert bus.ended("r") == "completed"  # one reader still follows it
    bus.unsubscribe("r", second)
    assert bus.ended("r") is None and bus.stored_after("r", 0) is None  # forgotten


def test_bus_keeps_nothing_of_a_run_that_ended_unfollowed_or_did_not_end_here() -> None:
    bus = Bus()
    bus.mark_live("r")
    bus.mark_done("r", "completed")  # nobody followed it
    assert bus.ended("r") is None and bus.stored_after("r", 0) is None
    bus.mark_live("p")
    bus.subscribe("p")
    bus.mark_done("p")  # parked or handed over: no final status here
    assert bus.ended("p") is None and bus.stored_after("p", 0) is None
    bus.mark_live("q")
    bus.subscribe("q")
    bus.mark_done("q", "failed")
    bus.mark_live("q")  # the same run again (resumed here): live, not ended
    assert bus.ended("q") is None and bus.is_live("q") and bus.stored_after("q", 0) == []
