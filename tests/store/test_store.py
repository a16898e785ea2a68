from __future__ import annotations

import asyncio

import pytest

from backend.messages.message import Message
from backend.store.repo import ConflictError, NotFoundError, RunNotOwned, Store
from tests.support.runs import executable


def msg(cid: str, rid: str, kind: str = "x") -> Message:
    m = Message.build(kind, kind)
    m.conversation_id, m.run_id = cid, rid
    return m


async def test_seq_strictly_increases_per_conversation_under_concurrency(
    store: Store,
) -> None:
    a = await store.create_conversation("1", "a")
    b = await store.create_conversation("1", "b")
    ra = await store.start_run("1", a, "g", "auto", "local")
    rb = await store.start_run("1", b, "g", "auto", "local")
    await asyncio.gather(
        *(store.append_message(msg(a, ra)) for _ in range(50)),
        *(store.append_message(msg(b, rb)) for _ in range(20)),
    )
    assert [m.seq for m in await store.messages(a)] == list(range(1, 51))
    assert [m.seq for m in await store.messages(b)] == list(range(1, 21))
    assert [m.seq for m in await store.messages(a, after=45)] == [46, 47, 48, 49, 50]


async def test_one_active_run_per_conversation(store: Store) -> None:
    cid = await store.create_conversation("1", "t")
    rid = await store.start_run("1", cid, "g", "auto", "local")
    with pytest.raises(ConflictError):
        await store.start_run("1", cid, "g", "auto", "local")
    await store.end_run(rid, "completed")
    assert (await executable(store, rid)).status == "completed"
    await store.start_run("1", cid, "g", "auto", "local")
    with pytest.raises(NotFoundError):
        await store.start_run("2", cid, "g", "auto", "local")


async def test_users_see_only_their_own(store: Store) -> None:
    cid = await store.create_conversation("1", "mine")
    assert await store.get_conversation("2", cid) is None
    assert await store.list_conversations("2") == []
    assert await store.delete_conversation("2", cid) is False
    conv = await store.get_conversation("1", cid)
    assert conv is not None and conv.title == "mine"


async def test_usage_per_stage_and_total(store: Store) -> None:
    cid = await store.create_conversation("1", "t")
    rid = await store.start_run("1", cid, "g", "auto", "local")
    await store.record_usage(cid, rid, "planning", "m", 10, 5, 0.001)
    await store.record_usage(
        cid, rid, "thinking", "m", 20, 10, None, cached_input_tokens=16, cache_write_tokens=3
    )
    await store.record_usage(cid, rid, "thinking", "m", 1, 1, None, cached_input_tokens=1)
    usage = await store.run_usage(rid)
    assert usage.stages["thinking"].model_dump() == {
        "calls": 2,
        "prompt_tokens": 21,
        "completion_tokens": 11,
        "total_tokens": 32,
        "cost": None,
        "input_tokens": 21,
        "cached_input_tokens": 17,
        "cache_write_tokens": 3,
        "output_tokens": 11,
        "cost_usd": None,
    }
    assert usage.total.total_tokens == 47
    assert usage.total.cost == usage.total.cost_usd == pytest.approx(0.001)
    assert (usage.total.cached_input_tokens, usage.total.cache_write_tokens) == (17, 3)
    await store.end_run(rid, "completed")
    other = await store.start_run("1", cid, "g2", "auto", "local")
    await store.record_usage(cid, other, "thinking", "m", 100, 1, 0.5, cached_input_tokens=90)
    conv = await store.get_conversation("1", cid)
    assert conv is not None
    assert (conv.input_tokens, conv.cached_input_tokens, conv.cache_write_tokens) == (131, 107, 3)
    assert conv.cost_usd == pytest.approx(0.501)
    per_run = {r.run_id: r.usage for r in conv.runs}
    assert (per_run[rid].cached_input_tokens, per_run[other].cached_input_tokens) == (17, 90)
    assert per_run[other].cost_usd == pytest.approx(0.5)
    assert per_run[rid].total_tokens == 47


async def test_delete_cascades(store: Store) -> None:
    cid = await store.create_conversation("1", "t")
    rid = await store.start_run("1", cid, "g", "auto", "local")
    await store.append_message(msg(cid, rid))
    await store.record_files(cid, rid, [("a.txt", 3)])
    assert await store.delete_conversation("1", cid)
    assert await store.messages(cid) == []
    assert await store.get_run(rid) is None


async def test_a_fenced_write_lands_only_while_its_owner_owns_the_running_run(
    store: Store,
) -> None:
    cid = await store.create_conversation("1", "t")
    rid = await store.start_run("1", cid, "g", "agent", "local", owner="a")
    stored = await store.append_message(msg(cid, rid), checkpoint="c1", owner="a")
    assert stored.seq == 1
    await store.save_checkpoint(rid, "c2", owner="a")
    # the run is taken over while "a" still executes it (its lease had expired)
    assert await store.take_over(rid, "a", "b") == 1
    with pytest.raises(RunNotOwned):
        await store.append_message(msg(cid, rid), checkpoint="stale", owner="a")
    with pytest.raises(RunNotOwned):
        await store.append_message(msg(cid, rid), owner="a")  # no checkpoint: fenced too
    with pytest.raises(RunNotOwned):
        await store.save_checkpoint(rid, "stale", "turns", owner="a")
    # nothing of "a" was written: no message, no seq taken, the checkpoint is the taker's
    assert [m.seq for m in await store.messages(cid)] == [1]
    assert (await executable(store, rid)).checkpoint == "c2"
    assert (await store.append_message(msg(cid, rid), checkpoint="c3", owner="b")).seq == 2
    assert (await executable(store, rid)).checkpoint == "c3"
    assert (await store.append_message(msg(cid, rid), owner="b")).seq == 3  # no checkpoint
    assert (await executable(store, rid)).checkpoint == "c3"
    # an ended run takes no fenced write, even from its last owner; unfenced ones still land
    await store.end_run(rid, "completed")
    with pytest.raises(RunNotOwned):
        await store.append_message(msg(cid, rid), owner="b")
    assert (await store.append_message(msg(cid, rid))).seq == 4
