"""Each aggregate of the Store, over SQLite and PostgreSQL: runs and their tasks, leases and
ownership, messages (kinds, open actions)."""

from __future__ import annotations

from backend.actions import builtin_registry
from backend.messages.kinds import MessageKind
from backend.messages.message import Message
from backend.messages.tasks import PlanTask
from backend.store.repo import Store
from backend.store.rows import OrphanedRun, StopTarget
from tests.support.runs import executable


async def _run(store: Store, owner: str | None = None) -> tuple[str, str]:
    cid = await store.create_conversation("1", "t")
    return cid, await store.start_run("1", cid, "g", "auto", "local", owner=owner)


def _msg(cid: str, rid: str, kind: str, status: str = "success", uuid: str = "") -> Message:
    m = Message.build(kind, kind, status=status, uuid=uuid or None)  # type: ignore[arg-type]
    m.conversation_id, m.run_id = cid, rid
    return m


async def test_messages_filter_by_kind_given_as_enum_or_string(store: Store) -> None:
    cid, rid = await _run(store)
    for kind in ("question", "write_code", "terminal_run", "edit_file", "finish_summery"):
        await store.append_message(_msg(cid, rid, kind))
    writers = tuple(d.kind for d in builtin_registry().defs() if d.handling.writes_files)
    files = await store.messages(cid, action_types=writers)
    assert [m.meta.action_type for m in files] == ["write_code", "edit_file"]
    summary = await store.messages(cid, run_id=rid, action_types=(MessageKind.FINISH_SUMMERY,))
    assert [m.seq for m in summary] == [5]
    assert type(summary[0].meta.action_type) is str
    plain = await store.messages(cid, action_types=("question",))
    assert [m.meta.action_type for m in plain] == ["question"]


async def test_open_messages_are_running_actions_without_a_final_partner(
    store: Store,
) -> None:
    cid, rid = await _run(store)
    await store.append_message(_msg(cid, rid, "task", "running", "t1"))
    await store.append_message(_msg(cid, rid, "terminal_run", "running", "a1"))
    await store.append_message(_msg(cid, rid, "write_code", "running", "a2"))
    await store.append_message(_msg(cid, rid, "write_code", "success", "a2"))
    assert [m.uuid for m in await store.open_messages(rid)] == ["a1"]  # tasks pair elsewhere


async def test_tasks_of_a_run_and_the_running_ones(store: Store) -> None:
    cid, rid = await _run(store)
    await store.save_tasks(
        rid,
        cid,
        [
            PlanTask(id="t1", title="A", description="", requirement="", status="pending"),
            PlanTask(id="t2", title="B", description="", requirement="", status="running"),
        ],
    )
    await store.update_task("t1", "running")
    await store.update_task("t2", "completed", "done")
    assert [t.id for t in await store.running_tasks(rid)] == ["t1"]


async def test_a_run_ends_once_and_only_by_its_owner(store: Store) -> None:
    cid, rid = await _run(store, owner="i1")
    assert await store.running_run_of(cid) == rid
    assert await store.end_run(rid, "failed", "x", owner="i2") is False
    assert await store.end_run(rid, "completed", owner="i1") is True
    assert await store.end_run(rid, "failed") is False
    run = await store.get_run(rid, user_id="1")
    assert run is not None and run.status == "completed"
    assert await store.get_run(rid, user_id="2") is None
    assert await store.running_run_of(cid) is None


async def test_a_run_whose_owner_lease_expired_is_orphaned_and_can_be_claimed(
    store: Store,
) -> None:
    await store.renew_instance("dead", "serve", 60)
    await store.renew_instance("live", "worker", 60)
    cid, rid = await _run(store, owner="dead")
    assert await store.orphaned_runs() == []
    await store.expire_instance("dead")
    assert await store.live_instances() == {"live"}
    assert await store.orphaned_runs() == [
        OrphanedRun(run_id=rid, conversation_id=cid, owner="dead")
    ]
    assert await store.claim_run(rid, "live", expected="someone else") is False
    assert await store.claim_run(rid, "live", expected="dead") is True
    assert await store.orphaned_runs() == []
    assert await store.expired_instances(0) == ["dead"]
    await store.delete_instances(["dead"])
    assert {i.id for i in await store.instances()} == {"live"}


async def test_a_stop_request_is_recorded_on_running_runs_only(store: Store) -> None:
    cid, rid = await _run(store, owner="i1")
    assert await store.request_stop(rid) == StopTarget(owner="i1", conversation_id=cid)
    assert await store.run_flags([rid, "nope"]) == {rid: ("running", True, "i1")}
    await store.end_run(rid, "stopped")
    assert await store.request_stop(rid) is None


async def test_a_runs_mcp_server_pick_is_stored_for_the_process_that_executes_it(
    store: Store,
) -> None:
    cid = await store.create_conversation("1", "t")
    picked = await store.start_run("1", cid, "g", "auto", "local", mcp_servers=["calc"])
    run = await store.run_for_execution(picked)
    assert run is not None and run.mcp_servers == ["calc"]
    await store.end_run(picked, "completed")
    everything = await store.start_run("1", cid, "g", "auto", "local")
    run = await store.run_for_execution(everything)
    assert run is not None and run.mcp_servers is None
    none = await store.create_conversation("1", "u")
    empty = await store.start_run("1", none, "g", "auto", "local", mcp_servers=[])
    assert (await executable(store, empty)).mcp_servers == []
