"""Conversations on SQLite and PostgreSQL: search, rename, default titles, uploads."""

from __future__ import annotations

from backend.store.repo import Store


async def test_search_by_title_and_goal_literally_and_per_user(store: Store) -> None:
    sales = await store.create_conversation("1", "Sales 100% Report")
    weather = await store.create_conversation("1", "Weather")
    other = await store.create_conversation("2", "Sales of another user")
    await store.start_run("1", weather, "Chart the RAIN in Oslo_2026", "auto", "local")

    async def ids(q: str, user: str = "1") -> set[str]:
        return {c.conversation_id for c in await store.list_conversations(user, q)}

    assert await ids("sales") == {sales}
    assert await ids("rain in oslo") == {weather}
    assert await ids("100%") == {sales}
    assert await ids("%") == {sales}
    assert await ids("o_2") == {weather}
    assert await ids("0_1") == set()  # '_' is no wildcard
    assert await ids("\\") == set()
    assert await ids("") == {sales, weather}
    assert await ids("sales", "2") == {other}


async def test_rename_and_a_titleless_conversation_named_by_its_first_goal(store: Store) -> None:
    cid = await store.create_conversation("1", "")
    assert await store.rename_conversation("2", cid, "not mine") is False
    rid = await store.start_run("1", cid, "g", "auto", "local", title="First goal")
    conv = await store.get_conversation("1", cid)
    assert conv is not None and conv.title == "First goal"
    await store.end_run(rid, "completed")
    assert await store.rename_conversation("1", cid, "Chosen") is True
    await store.start_run("1", cid, "g", "auto", "local", title="Second goal")
    conv = await store.get_conversation("1", cid)
    assert conv is not None and conv.title == "Chosen"  # a title it has is kept


async def test_a_run_made_with_its_conversation_in_one_step(store: Store) -> None:
    rid = await store.start_run(
        "1", "c-new", "g", "auto", "local", title="T", new_conversation=True
    )
    conv = await store.get_conversation("1", "c-new")
    assert conv is not None and conv.title == "T" and conv.status == "running"
    run = await store.get_run(rid, "1")
    assert run is not None and run.conversation_id == "c-new" and run.status == "running"
    assert await store.get_conversation("2", "c-new") is None  # its user's only


async def test_uploads_are_remembered_until_a_run_changes_them(store: Store) -> None:
    cid = await store.create_conversation("1", "")
    await store.record_uploads(cid, [("b.csv", 3), ("a/data.csv", 10)])
    assert await store.uploaded_files(cid) == ["a/data.csv", "b.csv"]
    rid = await store.start_run("1", cid, "g", "auto", "local")
    await store.record_files(cid, rid, [("b.csv", 5)])
    assert await store.uploaded_files(cid) == ["a/data.csv"]
