"""A stop that lands while a run is parking (after it let go of the run, before it left
this process) still stops it: the run does not stay waiting with its stop unseen."""

from __future__ import annotations

from pathlib import Path

from backend.agent.specialists import BUILTIN
from backend.llm.testing import ScriptedLLM
from backend.messages.bus import Bus
from backend.runs import RunManager
from backend.store.repo import Store
from tests.agent.scripts import finish, plan_reply, run
from tests.support.settings import make_settings


async def test_a_stop_right_after_the_run_let_go_ends_it_stopped(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    store = Store(settings.database_url)
    store.migrate()
    llm = ScriptedLLM(
        [("planning", plan_reply("Mark")), ("thinking", run("echo ran >> m") + finish("x"))]
    )
    manager = RunManager(settings, store, Bus(), llm, BUILTIN)
    await manager.open()
    release = store.release_parked
    stops: list[bool] = []

    async def release_then_stop(run_id: str, owner: str, uuid: str) -> bool | None:
        let_go = await release(run_id, owner, uuid)
        stops.append(await manager.stop(run_id))  # lands now: released, not yet left
        return let_go

    store.release_parked = release_then_stop  # type: ignore[method-assign]
    try:
        cid, rid = await manager.start("1", "mark it", mode="agent", approval="risky")
        assert await manager.wait(rid, timeout=30) == "stopped"
        assert stops == [True]
        row = await store.get_run(rid)
        assert row is not None and row.status == "stopped" and row.wait is None
        msgs = await store.messages(cid)
        kinds = [(m.meta.action_type, m.status) for m in msgs]
        assert ("approval", "failure") in kinds and ("stop", "failure") in kinds
        assert not list(tmp_path.rglob("m"))
    finally:
        await manager.shutdown()
        await store.close()
