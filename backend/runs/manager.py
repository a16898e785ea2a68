"""RunManager: start, execute, stop and delete runs whose ownership lives in the store.

A run row names its owner (an instance: one server or worker process, see lease.py). The
owner executes the run as an asyncio task; stop and delete are requests recorded in the store
and delivered to the owner by the notifier, from any process. Ending a run changes only a run
that is still running, so an owner and a recovering process never both end it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

import anyio

from backend.actions.registry import Registry, for_settings
from backend.agent.live import DeltaSink
from backend.agent.publisher import Listener
from backend.agent.specialists import Specialist, load_specialists
from backend.agent.titles import goal_title
from backend.checkpoints import Checkpoints
from backend.checkpoints.gitrepo import GitRepo
from backend.checkpoints.run import RunCheckpoints
from backend.messages.bus import Bus
from backend.runs import parking
from backend.runs.closing import close_unexecuted
from backend.runs.execution import execute_record
from backend.runs.executor import Executor, InlineExecutor
from backend.runs.lease import LeaseKeeper, new_instance_id
from backend.runs.local import Followers, LocalRun, LocalRuns
from backend.runs.notify import LocalNotifier, Notifier, make_notifier
from backend.runs.runtimes import Runtimes
from backend.runs.takeover import take_over
from backend.runs.waiting import wait_ended
from backend.runtime.base import Runtime
from backend.runtime.sandboxing import local_runtime_for_process
from backend.store.repo import ConflictError, Store, new_id
from backend.store.rows import RunToExecute
from backend.tools.kit import Tools
from backend.workspace import workspace_path

if TYPE_CHECKING:
    from backend.config import Settings
    from backend.llm.base import LLM

log = logging.getLogger(__name__)


class RunValues(TypedDict):
    """A new run's values, as stored and as its row is executed here."""

    goal: str
    mode: str
    runtime: str
    owner: str | None
    model: str
    mcp_servers: list[str] | None
    approval: str
    can_ask: bool
    new_conversation: bool


class ShuttingDown(Exception):
    """This process takes no new runs (SIGTERM received)."""


class RunManager:
    def __init__(
        self,
        settings: Settings,
        store: Store,
        notifier: Notifier | Bus,
        llm: LLM,
        specialists: tuple[Specialist, ...],
        runtimes: dict[str, Runtime] | None = None,
        *,
        kind: str = "serve",
        instance_id: str | None = None,
        executor: Executor | None = None,
        tools: Tools | None = None,
        actions: Registry | None = None,
    ) -> None:
        self.settings = settings
        # the actions its runs are offered: the builtin ones and ACTION_MODULES', unless the
        # process (a test) gives its own
        self.actions = actions if actions is not None else for_settings(settings)
        # the tool actions' dependencies (search, web pages, MCP servers); made here (and
        # closed at shutdown) unless the process gives its own
        self._own_tools = tools is None
        self.tools = tools if tools is not None else Tools.from_settings(settings)
        self.store = store
        self.instance_id = instance_id or new_instance_id(kind)
        if self.tools.previews is None:  # previews: the services this process hosts
            from backend.previews.host import PreviewHost

            self.tools = replace(
                self.tools, previews=PreviewHost(settings, store, self.instance_id)
            )
        self.notifier: Notifier = LocalNotifier(notifier) if isinstance(notifier, Bus) else notifier
        self.bus = self.notifier.bus
        self.llm = llm
        self.specialists = specialists
        self.workspace_root = Path(settings.workspace_dir).resolve()
        # the workspaces' checkpoints (backend/checkpoints), beside them, never inside one
        checkpoint_root = settings.checkpoint_dir or self.workspace_root / ".checkpoints"
        self.checkpoints = Checkpoints(
            Path(checkpoint_root).resolve(), store, settings.checkpoint_max_mb
        )
        self.kind = kind
        self.runtimes = Runtimes(settings, self.instance_id, runtimes)
        self.executor: Executor = executor or InlineExecutor(self.launch)
        self.runs = LocalRuns()  # the runs of this process, one record each
        self.lease = LeaseKeeper(
            store,
            self.instance_id,
            kind,
            settings.lease_seconds,
            local_runs=self.runs.controls,
            stop_local=lambda run_id, lost: self.runs.stop(run_id, lost=lost),
            runtimes=self.runtimes.loaded,
            take_over=self.take_over,
            sweep=lambda scan: parking.sweep(self, scan),
        )
        # queue workers: defer the job of a run taken over (set by backend/runs/worker.py)
        self.requeue: Callable[[str], Awaitable[None]] | None = None
        self.accepting = True
        self._cleanups: set[asyncio.Future[None]] = set()
        self._opened = False
        self._closed = False
        self.executing = False  # the executor is started: answered runs can be resumed

    @classmethod
    def for_process(
        cls,
        settings: Settings,
        store: Store,
        llm: LLM,
        *,
        kind: str,
        specialists: tuple[Specialist, ...] | None = None,
        runtimes: dict[str, Runtime] | None = None,
        executor: Executor | None = None,
        tools: Tools | None = None,
    ) -> RunManager:
        """The manager of a `planact serve`, `worker` or `run` process (``kind``): an instance
        id of its own and the notifier of its database. ``executor``: inline by default."""
        iid = new_instance_id(kind)
        if specialists is None:
            specialists = load_specialists(settings.specialists_file)
        runtimes = dict(runtimes or {})
        if "local" not in runtimes:
            # the start-up check of the local runtime's sandbox (SandboxConfigError)
            runtimes["local"] = local_runtime_for_process(settings, serving=kind != "cli")
        notifier = make_notifier(settings.database_url, iid)
        return cls(
            settings,
            store,
            notifier,
            llm,
            specialists,
            runtimes,
            kind=kind,
            instance_id=iid,
            executor=executor,
            tools=tools,
        )

    # -- runtimes -------------------------------------------------------------------------
    def runtime(self, name: str) -> Runtime:
        return self.runtimes.get(name)

    def loaded_runtimes(self) -> list[Runtime]:
        return self.runtimes.loaded()

    def workspace(self, user_id: str, conversation_id: str) -> Path:
        return workspace_path(self.workspace_root, user_id, conversation_id)

    # -- process lifecycle ----------------------------------------------------------------
    def checkpoint_repo(self, user_id: str, conversation_id: str) -> GitRepo:
        """The shadow repository of the conversation's checkpoints."""
        return self.checkpoints.repo(
            user_id, conversation_id, self.workspace(user_id, conversation_id)
        )

    async def end_of_run_checkpoint(self, user_id: str, cid: str, run_id: str) -> None:
        """The run's last checkpoint (recovery: a run ended by another process than its
        executor); a failure is logged, never the run's."""
        try:
            seq = await self.store.last_seq(cid)
            await RunCheckpoints(
                self.checkpoints, self.checkpoint_repo(user_id, cid), cid, run_id
            ).end_of_run(seq)
        except Exception:
            log.exception("end-of-run checkpoint of run %s failed", run_id)

    async def open(self) -> None:
        """Register this instance (lease), listen for notifications, recover orphans."""
        if self._opened:
            return
        self._opened = True
        self.notifier.on_control(self._on_control)
        await self.notifier.start()
        await self.lease.start()
        await self.executor.start()
        self.executing = True
        # waits that timed out while no process was up
        await parking.sweep(self, await self.store.recovery_scan(self.lease.seconds))

    async def recover(self) -> int:
        """Take over the runs whose owner's lease expired (also run periodically by the
        lease keeper). Returns how many runs this call took."""
        if not self._opened:
            await self.open()
        return await self.lease.recover()

    async def drain(self, grace: float) -> None:
        """Take no new runs. A server or worker hands its active runs over at their next
        step boundary (before their next model call), within ``grace`` seconds; past it
        they are interrupted where they are. Either way they stay `running` in the store
        and a live process (or this one's next start) continues them. A `planact run`
        instead lets its own run go on up to ``grace``, then stops it."""
        self.accepting = False
        if self.kind == "cli":
            await self.runs.stop_all(grace)
        else:
            await self.runs.hand_over(grace)

    async def shutdown(self, grace: float = 0.0) -> None:
        if self._closed:
            return
        self._closed = True
        await self.drain(grace)
        self.bus.close_readers()
        with contextlib.suppress(Exception):
            await self.executor.close()
        await self.lease.stop()
        with contextlib.suppress(Exception):
            await self.notifier.close()
        if self._cleanups:  # ending abandoned runs, dropping deleted conversations' sandboxes
            await asyncio.wait(set(self._cleanups), timeout=10)
        if self.tools.previews is not None:  # previews: no service outlives its process
            await self.tools.previews.close()
        await self.runtimes.close()
        if self._own_tools:
            await self.tools.aclose()

    # -- starting runs --------------------------------------------------------------------
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
        delta_listener: DeltaSink | None = None,
        mcp_servers: list[str] | None = None,
        approval: str | None = None,
        can_ask: bool | None = None,
    ) -> tuple[str, str]:
        """Create the run and hand it to the executor. ``approval``: which actions wait for
        a person's approval (None: APPROVAL_MODE); ``can_ask``: ask_user is offered (None:
        in a server, not in a `planact run`, which says when it has a terminal). Raises
        ConflictError when the conversation has an active run (in any process),
        NotFoundError when it does not exist, ShuttingDown when this process takes no new
        runs."""
        if not self.accepting:
            raise ShuttingDown()
        if not self._opened:
            await self.open()
        cid = conversation_id or new_id()  # a new conversation: made with the run
        owner = self.instance_id if self.executor.runs_here else None
        # the run's values, worked out once: stored, and (executed here) its row as is
        values: RunValues = {
            "goal": goal,
            "mode": mode,
            "runtime": runtime or self.settings.runtime,
            "owner": owner,
            "model": model or "",
            "mcp_servers": mcp_servers,
            "approval": approval or self.settings.approval_mode,
            "can_ask": self.kind != "cli" if can_ask is None else can_ask,
            "new_conversation": conversation_id is None,
        }
        rid = await self.store.start_run(user_id, cid, **values, title=goal_title(goal))
        if conversation_id is not None:  # what a rewind took away is dropped for good now
            await self.checkpoints.run_began(self.checkpoint_repo(user_id, cid), cid)
        if listener is not None or delta_listener is not None:  # (the CLI: its own run)
            self.runs.follow(rid, Followers(listener, delta_listener))
        record = None
        if owner is not None:  # executed here: no need to read back what we just wrote
            record = self.runs.enter(rid)
            record.row = RunToExecute(
                run_id=rid,
                conversation_id=cid,
                user_id=user_id,
                status="running",
                stop_requested=False,
                **values,
            )
        try:
            await self.executor.submit(rid)
        except Exception as exc:
            log.exception("could not hand run %s to the executor", rid)
            self.runs.unfollow(rid)
            if record is not None:
                self.runs.leave(record)
            if owner is None:  # queued: nobody owns it, and no worker ever will; end it here
                await self.store.claim_run(rid, self.instance_id, None)
            await self.close_unexecuted(rid, "failed", f"The run could not be queued: {exc}")
            raise
        return cid, rid

    def launch(self, run_id: str) -> asyncio.Task[str]:
        """Execute a run of this instance in the background (the inline executor)."""
        record = self.runs.enter(run_id)
        record.task = task = asyncio.create_task(self.execute(run_id), name=f"run-{run_id}")
        task.add_done_callback(lambda t: self._after(record, t))
        return task

    def _after(self, record: LocalRun, task: asyncio.Task[str]) -> None:
        """The run's task is done: its record is dropped (also when it was cancelled before
        it began). A task that died without ending its run (cancelled before it began, or a
        bug before the pipeline): the run is ended here, with its messages closed."""
        if record.task is task:  # (not a newer execution's)
            self.runs.leave(record)
        if not task.cancelled() and task.exception() is None:
            return
        run_id = record.run_id
        if not task.cancelled():
            log.error("run %s crashed", run_id, exc_info=task.exception())
        stopped = task.cancelled()
        reason = "" if stopped else f"Internal error: {task.exception()!r}"
        self.background(self._end_abandoned(run_id, stopped, reason))

    def background(self, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` on its own, holding a reference until it is done."""
        self._cleanups.add(task := asyncio.ensure_future(work))
        task.add_done_callback(self._cleanups.discard)

    async def _end_abandoned(self, run_id: str, stopped: bool, reason: str) -> None:
        try:
            if await self.close_unexecuted(run_id, "stopped" if stopped else "failed", reason):
                self.runs.unfollow(run_id)  # it ended: nobody follows it any more
        finally:
            self.bus.mark_done(run_id)

    async def execute(self, run_id: str) -> str:
        """Run ``run_id`` here to its end: take it if it is queued, refuse it if another
        instance owns it or it already ended. Returns the final status."""
        record = self.runs.enter(run_id)
        try:
            return await execute_record(self, record)
        finally:
            self.runs.leave(record)

    def answer_owner(self) -> str | None:
        """Who goes on with a run answered here (backend/waits): this process, or a worker."""
        return parking.answer_owner(self)

    async def resume_answered(self, run_id: str) -> None:
        await parking.resume_answered(self, run_id)

    async def take_over(self, run_id: str, dead_owner: str) -> bool:
        """Continue a run whose owner died (backend/runs/takeover.py)."""
        return await take_over(self, run_id, dead_owner)

    async def close_unexecuted(self, run_id: str, status: str, reason: str) -> bool:
        """End a run this instance owns but does not execute (recovered, or queued and
        stopped): its open messages and tasks closed, `error` or `stop`, a summary."""
        return await close_unexecuted(
            self.store,
            self.bus,
            self.workspace,
            self.instance_id,
            run_id,
            status,
            reason,
            self.actions,
            end_checkpoint=self.end_of_run_checkpoint,
        )

    # -- stop, wait, delete ---------------------------------------------------------------
    async def stop(self, run_id: str) -> bool:
        """Record a stop request (any process); the owner stops the run. Returns False when
        the run was not running."""
        info = await self.store.request_stop(run_id)
        if info is None:
            return False
        control = record.control if (record := self.runs.get(run_id)) is not None else None
        if control is not None:
            self.runs.stop(run_id)
            if control.ending:
                # it may be parking: a stop recorded after it let go of the run (it has no
                # owner then) is not seen by it, so the run is ended here
                await parking.stop_parked(self, run_id)
        elif info.owner is None:
            # queued and not taken by a worker yet, or parked on a wait: end it here
            if await self.store.claim_run(run_id, self.instance_id, None):
                await self.close_unexecuted(run_id, "stopped", "")
            elif not await parking.stop_parked(self, run_id):
                self.notifier.control("stop", run_id)
        else:
            self.notifier.control("stop", run_id)
        return True

    def _on_control(self, kind: str, arg: str) -> None:
        if kind == "forget":
            self.background(self.runtimes.forget_announced(arg, self.workspace))
            return
        if kind != "stop" or (record := self.runs.get(arg)) is None:
            return
        if record.row is not None:  # not begun yet: it begins stopped
            record.row = replace(record.row, stop_requested=True)
        self.runs.stop(arg)

    async def wait(self, run_id: str, timeout: float | None = None) -> str | None:  # noqa: ASYNC109
        """Wait for a run to end (on any process); its final status, or None on timeout."""
        task = self.runs.task(run_id)
        if task is not None:
            done, _ = await asyncio.wait({task}, timeout=timeout)
            if not done:
                return None
        return await wait_ended(self.store, self.bus, self.notifier.cross_process, run_id, timeout)

    async def delete_conversation(self, user_id: str, conversation_id: str) -> bool:
        """Stop its run (on whichever process owns it), wait for it to end, then delete its
        rows, its sandbox and its workspace folder. Raises ConflictError when the run did
        not end in time (nothing is deleted then)."""
        if await self.store.get_conversation(user_id, conversation_id) is None:
            return False
        rid = await self.store.running_run_of(conversation_id)
        if rid is not None:
            await self.stop(rid)
            # a dead owner's run is failed by recovery once its lease expires
            bound = self.settings.lease_seconds + 10
            if await self.wait(rid, timeout=bound) is None:
                raise ConflictError(conversation_id)
        if not await self.store.delete_conversation(user_id, conversation_id, self.instance_id):
            return False
        workspace = self.workspace(user_id, conversation_id)
        # ours at once; other processes' (a queue worker's sandbox) on the store's "forget"
        await self.runtimes.forget(workspace)
        if self.tools.previews is not None:  # ours now; other processes' watchers: row gone
            await self.tools.previews.forget(conversation_id)
        await anyio.to_thread.run_sync(lambda: shutil.rmtree(workspace, ignore_errors=True))
        await self.checkpoints.forget(
            self.checkpoint_repo(user_id, conversation_id), conversation_id
        )
        return True
