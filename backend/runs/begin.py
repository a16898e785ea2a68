"""A run as it begins in the process that executes it: its deps, state and control."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from backend.agent.context import RunContext
from backend.agent.control import RunControl
from backend.agent.deps import RunDeps
from backend.agent.live import DeltaSink
from backend.agent.publisher import Listener, Publisher
from backend.agent.state import RunState
from backend.runs.history import conversation_history
from backend.runs.notify import Notifier
from backend.runs.stop_checked import StopCheckedRuntime
from backend.runtime.base import Runtime
from backend.store.repo import Store
from backend.store.rows import RunToExecute

if TYPE_CHECKING:
    from backend.actions.registry import Registry
    from backend.config import Settings
    from backend.llm.base import LLM
    from backend.tools.kit import Tools


async def build_context(
    run: RunToExecute,
    *,
    settings: Settings,
    store: Store,
    notifier: Notifier,
    llm: LLM,
    runtime: Runtime,
    workspace: Path,
    actions: Registry,
    tools: Tools | None = None,
    shutting_down: bool = False,
    listener: Listener | None = None,
    delta_listener: DeltaSink | None = None,
    owner: str | None = None,
) -> RunContext:
    """The context of ``run`` (its row, as the store gives it for execution); ``owner``:
    the executing instance, which fences the run's writes (a take-over ends them here)."""
    run_id, cid = run.run_id, run.conversation_id
    checkpoint = run.checkpoint
    state = (
        RunState.from_json(checkpoint, run.start_files, run.transcript)
        if checkpoint
        else RunState(
            run_id=run_id,
            conversation_id=cid,
            user_id=run.user_id,
            goal=run.goal,
            mode=run.mode,
            runtime=run.runtime,
            workspace=workspace,
            model=run.model or None,
            mcp_servers=run.mcp_servers,
            approval=run.approval or "never",
            can_ask=run.can_ask,
            history=[] if run.new_conversation else await conversation_history(store, cid, run_id),
        )
    )
    state.workspace = workspace  # the same volume, wherever the run goes on
    control = RunControl(run_id, stop_requested=run.stop_requested, shutting_down=shutting_down)
    deps = RunDeps(
        settings=settings,
        store=store,
        notifier=notifier,
        llm=llm,
        runtime=StopCheckedRuntime(runtime, control),
        actions=actions,
        tools=tools,
    )
    publisher = Publisher(store, notifier.bus, cid, run_id, listener, owner)
    ctx = RunContext(deps, state, publisher, control, delta_listener=delta_listener)
    ctx.resumed = bool(checkpoint)
    return ctx
