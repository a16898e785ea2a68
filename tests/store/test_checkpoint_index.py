"""The checkpoints' index, rewinds, forks and shares in the store, over SQLite and
PostgreSQL (any replica reads the same)."""

from __future__ import annotations

import pytest

from backend.messages.message import Message
from backend.store.checkpoints import StoredCheckpoint, StoredShare
from backend.store.repo import ConflictError, NotFoundError, RestoringError, Store
from backend.store.tables import utcnow


def msg(cid: str, rid: str, text: str) -> Message:
    m = Message.build("x", text)
    m.conversation_id, m.run_id = cid, rid
    return m


def cp(cid: str, seq: int, rid: str = "r") -> StoredCheckpoint:
    return StoredCheckpoint(cid, seq, rid, f"at {seq}", 1, f"{seq:040d}", 10, utcnow())


async def conversation_with(store: Store, n: int) -> tuple[str, str]:
    cid = await store.create_conversation("1", "t")
    rid = await store.start_run("1", cid, "g", "auto", "local")
    for i in range(n):
        await store.append_message(msg(cid, rid, f"m{i + 1}"))
    await store.end_run(rid, "completed")
    return cid, rid


async def test_a_rewind_hides_later_messages_a_redo_shows_them_a_new_run_drops_them(
    store: Store,
) -> None:
    cid, rid = await conversation_with(store, 6)
    for seq in (2, 4, 6):
        await store.add_checkpoint(cp(cid, seq, rid))
    await store.rewind_history(cid, 2)
    await store.restored(cid)
    assert [m.seq for m in await store.messages(cid)] == [1, 2]
    assert [m.seq for m in await store.messages(cid, include_hidden=True)] == list(range(1, 7))
    assert await store.visible_seq(cid) == 2
    await store.rewind_history(cid, 4)  # a redo
    await store.restored(cid)
    assert [m.seq for m in await store.messages(cid)] == [1, 2, 3, 4]
    await store.rewind_history(cid, 2)
    await store.restored(cid)
    rid2 = await store.start_run("1", cid, "again", "auto", "local")
    with pytest.raises(ConflictError):  # a run is active
        await store.rewind_history(cid, 4)
    assert sorted(await store.drop_rewound(cid)) == [4, 6]
    assert [c.seq for c in await store.checkpoints_of(cid)] == [2]
    new = await store.append_message(msg(cid, rid2, "after"))
    await store.end_run(rid2, "completed")
    assert new.seq == 7
    await store.add_checkpoint(cp(cid, 7, rid2))
    await store.rewind_history(cid, 7)  # the dropped ones never come back
    assert [m.seq for m in await store.messages(cid)] == [1, 2, 7]
    assert await store.drop_rewound(cid) == []


async def test_no_run_starts_and_no_other_rewind_begins_while_a_rewind_puts_files_back(
    store: Store,
) -> None:
    cid, _rid = await conversation_with(store, 4)
    await store.rewind_history(cid, 2)
    with pytest.raises(RestoringError):  # the files are being put back
        await store.start_run("1", cid, "too soon", "auto", "local")
    with pytest.raises(RestoringError):
        await store.rewind_history(cid, 4)
    with pytest.raises(NotFoundError):  # another user's conversation is still not found
        await store.start_run("2", cid, "not mine", "auto", "local")
    assert await store.running_run_of(cid) is None
    await store.restored(cid)
    rid = await store.start_run("1", cid, "now", "auto", "local")
    assert (await store.running_run_of(cid)) is not None
    await store.end_run(rid, "completed")


async def test_a_rewinder_that_died_frees_the_conversation_when_its_lease_ends(
    store: Store,
) -> None:
    cid, _rid = await conversation_with(store, 3)
    await store.rewind_history(cid, 1, lease=-1.0)  # taken, never given back, lease over
    rid = await store.start_run("1", cid, "after a crash", "auto", "local")
    await store.end_run(rid, "completed")
    await store.rewind_history(cid, 2, lease=-1.0)  # another rewind may take it, too


async def test_a_fork_copies_the_history_and_checkpoints_up_to_its_seq(store: Store) -> None:
    cid, rid = await conversation_with(store, 5)
    for seq in (2, 4):
        await store.add_checkpoint(cp(cid, seq, rid))
    kept = await store.fork_conversation("1", cid, "forked", 3, "t")
    assert [c.seq for c in kept] == [2]
    assert [m.content for m in await store.messages("forked")] == ["m1", "m2", "m3"]
    assert [c.seq for c in await store.checkpoints_of("forked")] == [2]
    assert await store.last_seq("forked") == 3
    assert len(await store.messages(cid)) == 5  # the original untouched
    conv = await store.get_conversation("1", "forked")
    assert conv is not None and conv.status == "idle"
    assert await store.get_conversation("2", "forked") is None


async def test_shares_are_found_by_token_and_revoked_together(store: Store) -> None:
    cid, _rid = await conversation_with(store, 3)
    seqs = await store.history_seqs(cid)
    assert seqs == [1, 2, 3]
    for token in ("tok-a", "tok-b"):
        await store.add_share(StoredShare(token, cid, "1", 3, "c" * 40, "t", "[1, 3]", utcnow()))
    found = await store.share_by_token("tok-a")
    assert found is not None and found.conversation_id == cid
    assert [m.content for m in await store.messages_at(cid, [1, 3])] == ["m1", "m3"]
    assert sorted(await store.revoke_shares(cid)) == ["tok-a", "tok-b"]
    assert await store.share_by_token("tok-a") is None
    assert await store.revoke_shares(cid) == []


async def test_deleting_a_conversation_deletes_its_index_and_shares(store: Store) -> None:
    cid, rid = await conversation_with(store, 2)
    await store.add_checkpoint(cp(cid, 2, rid))
    await store.add_share(StoredShare("tok", cid, "1", 2, "c" * 40, "t", "[1, 2]", utcnow()))
    assert await store.delete_conversation("1", cid)
    assert await store.checkpoints_of(cid) == []
    assert await store.share_by_token("tok") is None
