"""RunManager: runs as background tasks, detached from the requests that start them."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from backend.agent.context import Listener, RunContext
from backend.agent.pipeline import run_pipeline
from backend.agent.routing import Specialist
from backend.messages.bus import Bus
from backend.messages.message import Message
from backend.runtime import make_runtime
from backend.runtime.base import Runtime
from backend.store.repo import Store
from backend.workspace import workspace_path

if TYPE_CHECKING:
    from backend.config import Settings
    from backend.llm.base import LLM

log = logging.getLogger(__name__)

HISTORY_TURNS = 6
HISTORY_CHARS = 1500


class RunManager:
    def __init__(
        self,
        settings: Settings,
        store: Store,
        bus: Bus,
        llm: LLM,
        specialists: tuple[Specialist, ...],
        runtimes: dict[str, Runtime] | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.bus = bus
        self.llm = llm
        self.specialists = specialists
        self.workspace_root = Path(settings.workspace_dir).resolve()
        self._runtimes: dict[str, Runtime] = dict(runtimes or {})
        self._tasks: dict[str, asyncio.Task[str]] = {}
        self._contexts: dict[str, RunContext] = {}

    # -- runtimes -------------------------------------------------------------------------
    def runtime(self, name: str) -> Runtime:
        if name not in self._runtimes:
            self._runtimes[name] = make_runtime(self.settings, name)
        return self._runtimes[name]

    def workspace(self, user_id: str, conversation_id: str) -> Path:
        return workspace_path(self.workspace_root, user_id, conversation_id)

    # -- lifecycle ------------------------------------------------------------------------
    async def recover(self) -> int:
        """Mark runs a crash or restart interrupted as failed, with an `error` message."""
        runs = await self.store.interrupted_runs()
        for run in runs:
            msg = Message.build(
                "error",
                "The server restarted while this run was active; the run was interrupted. "
                "Send the goal again to continue.",
                status="failure",
            )
            msg.conversation_id = run["conversation_id"]
            msg.run_id = run["run_id"]
            await self.store.append_message(msg)
            await self.store.end_run(run["run_id"], "failed", "interrupted by a restart")
            self.bus.notify(run["run_id"])
        return len(runs)

    async def start(
        self,
        user_id: str,
        goal: str,
        *,
        conversation_id: str | None = None,
        mode: str = "auto",
        runtime: str | None = None,
        listener: Listener | None = None,
        model: str | None = None,
    ) -> tuple[str, str]:
        """Create the run and start it in the background. Raises ConflictError when the
        conversation has an active run, NotFoundError when it does not exist."""
        runtime_name = runtime or self.settings.runtime
        created = conversation_id is None
        cid = conversation_id or await self.store.create_conversation(user_id, _title(goal))
        history = [] if created else await self._history(cid)
        rid = await self.store.start_run(user_id, cid, goal, mode, runtime_name)
        ctx = RunContext(
            settings=self.settings,
            store=self.store,
            bus=self.bus,
            llm=self.llm,
            runtime=self.runtime(runtime_name),
            user_id=user_id,
            conversation_id=cid,
            run_id=rid,
            goal=goal,
            mode=mode,
            workspace=self.workspace(user_id, cid),
            listener=listener,
            history=history,
            model=model,
        )
        self._contexts[rid] = ctx
        self.bus.mark_live(rid)
        task = asyncio.create_task(self._drive(ctx), name=f"run-{rid}")
        self._tasks[rid] = task
        return cid, rid

    async def _drive(self, ctx: RunContext) -> str:
        status = "failed"
        try:
            status = await run_pipeline(ctx, self.specialists)
        finally:
            try:
                await self.store.end_run(ctx.run_id, status)
            finally:
                self.bus.mark_done(ctx.run_id)
                self._tasks.pop(ctx.run_id, None)
                self._contexts.pop(ctx.run_id, None)
        return status

    async def stop(self, run_id: str) -> None:
        task = self._tasks.get(run_id)
        if task is not None and not task.done():
            task.cancel()

    async def wait(self, run_id: str) -> str | None:
        task = self._tasks.get(run_id)
        if task is None:
            return None
        with contextlib.suppress(asyncio.CancelledError):
            return await asyncio.shield(task)
        return None

    async def stop_conversation(self, conversation_id: str) -> None:
        for rid, ctx in list(self._contexts.items()):
            if ctx.conversation_id == conversation_id:
                await self.stop(rid)
                await self.wait(rid)

    async def delete_conversation(self, user_id: str, conversation_id: str) -> bool:
        """Stop its run, then delete its rows, its sandbox and its workspace folder."""
        await self.stop_conversation(conversation_id)
        if not await self.store.delete_conversation(user_id, conversation_id):
            return False
        workspace = self.workspace(user_id, conversation_id)
        for runtime in list(self._runtimes.values()):
            await runtime.forget(workspace)
        await anyio.to_thread.run_sync(lambda: shutil.rmtree(workspace, ignore_errors=True))
        return True

    async def shutdown(self) -> None:
        for ctx in self._contexts.values():
            ctx.shutting_down = True
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        for rt in self._runtimes.values():
            with contextlib.suppress(Exception):
                await rt.close()

    async def _history(self, cid: str) -> list[dict[str, str]]:
        """Earlier goals of the conversation with their answers, for follow-up goals."""
        msgs = await self.store.messages(
            cid, limit=100_000, action_types=("question", "auto_reply", "finish_summery")
        )
        turns: list[dict[str, str]] = []
        for m in msgs:
            kind = m.meta.action_type
            if kind == "question":
                turns.append({"goal": _clip(m.content), "answer": ""})
            elif kind in ("auto_reply", "finish_summery") and turns:
                turns[-1]["answer"] = _clip(m.content)
        return turns[-HISTORY_TURNS:]


def _title(goal: str) -> str:
    line = " ".join(goal.split())
    return line[:80] + ("…" if len(line) > 80 else "")


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= HISTORY_CHARS else text[:HISTORY_CHARS] + "…"
