"""RunManager: start, execute, stop and delete runs whose ownership lives in the store.

A run row names its owner (an instance: one server or worker process, see lease.py). The
owner executes the run as an asyncio task; stop and delete are requests recorded in the store
and delivered to the owner by the notifier, from any process. Ending a run changes only a run
that is still running, so an owner and a recovering process never both end it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import shutil
import threading
from collections.abc import Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import anyio

from backend.agent.context import Listener, RunContext
from backend.agent.live import DeltaSink
from backend.agent.pipeline import run_pipeline
from backend.agent.routing import Specialist, load_specialists
from backend.agent.titles import goal_title
from backend.messages.bus import Bus
from backend.runs.executor import Executor, InlineExecutor
from backend.runs.guard import StopCheckedRuntime
from backend.runs.lease import LeaseKeeper, close_run, new_instance_id
from backend.runs.notify import LocalNotifier, Notifier, make_notifier
from backend.runtime import make_runtime
from backend.runtime.base import Runtime
from backend.runtime.sandboxing import local_runtime_for_process
from backend.store.repo import ConflictError, Store
from backend.workspace import workspace_path

if TYPE_CHECKING:
    from backend.config import Settings
    from backend.llm.base import LLM

log = logging.getLogger(__name__)
T = TypeVar("T")

HISTORY_TURNS = 6
HISTORY_CHARS = 1500
CANCEL_REPEAT = 0.2  # seconds between repeated cancellations of a run that must stop


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
    ) -> None:
        self.settings = settings
        self.store = store
        self.notifier: Notifier = LocalNotifier(notifier) if isinstance(notifier, Bus) else notifier
        self.bus = self.notifier.bus
        self.llm = llm
        self.specialists = specialists
        self.workspace_root = Path(settings.workspace_dir).resolve()
        self.instance_id = instance_id or new_instance_id(kind)
        self.kind = kind
        self.executor: Executor = executor or InlineExecutor(self)
        self.lease = LeaseKeeper(self)
        self.accepting = True
        self._runtimes: dict[str, Runtime] = dict(runtimes or {})
        self._tasks: dict[str, asyncio.Task[str]] = {}
        self._contexts: dict[str, RunContext] = {}
        self._listeners: dict[str, Listener] = {}
        self._delta_listeners: dict[str, DeltaSink] = {}
        self._created: dict[str, dict[str, Any]] = {}  # inline runs: their row, as written
        self._started: set[str] = set()
        self._cancellers: dict[str, asyncio.Task[None]] = {}
        self._cleanups: set[asyncio.Future[None]] = set()
        self._opened = False
        self._closed = False
        self._grace_over = False
        self._runtimes_lock = threading.Lock()

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
    ) -> RunManager:
        """The manager of a `planact serve`, `worker` or `run` process (``kind``): an instance
        id of its own and the notifier of its database."""
        iid = new_instance_id(kind)
        if specialists is None:
            specialists = load_specialists(settings.specialists_file)
        runtimes = dict(runtimes or {})
        if "local" not in runtimes:
            # the start-up check of the local runtime's sandbox (SandboxConfigError)
            runtimes["local"] = local_runtime_for_process(settings, serving=kind != "cli")
        notifier = make_notifier(settings.database_url, iid)
        return cls(
            settings, store, notifier, llm, specialists, runtimes, kind=kind, instance_id=iid
        )

    # -- runtimes -------------------------------------------------------------------------
    def runtime(self, name: str) -> Runtime:
        """The runtime ``name``, made once (the docker probe asks from a thread while the
        first run may ask from the loop); a docker runtime labels sandboxes with our id."""
        with self._runtimes_lock:
            if name not in self._runtimes:
                self._runtimes[name] = make_runtime(self.settings, name, owner=self.instance_id)
            return self._runtimes[name]

    def loaded_runtimes(self) -> list[Runtime]:
        return list(self._runtimes.values())

    def workspace(self, user_id: str, conversation_id: str) -> Path:
        return workspace_path(self.workspace_root, user_id, conversation_id)

    # -- process lifecycle ----------------------------------------------------------------
    async def open(self) -> None:
        """Register this instance (lease), listen for notifications, recover orphans."""
        if self._opened:
            return
        self._opened = True
        self.notifier.on_control(self._on_control)
        await self.notifier.start()
        await self.lease.start()
        await self.executor.start()

    async def recover(self) -> int:
        """Fail the runs whose owner's lease expired (also run periodically by the lease
        keeper). Returns how many runs this call failed."""
        if not self._opened:
            await self.open()
        return await self.lease.recover()

    async def drain(self, grace: float) -> None:
        """Take no new runs; let active runs go on up to ``grace`` seconds, then stop them
        with a message saying the server shut down."""
        self.accepting = False
        tasks = [t for t in self._tasks.values() if not t.done()]
        if tasks and grace > 0:
            log.warning("shutting down: %d active run(s), %.0f s to finish", len(tasks), grace)
            await asyncio.wait(tasks, timeout=grace)
        self._grace_over = True  # a run that registers from now on stops at once
        for rid, task in list(self._tasks.items()):
            if not task.done():
                ctx = self._contexts.get(rid)
                if ctx is not None:
                    ctx.shutting_down = True
                self._stop_local(rid)
        remaining = [t for t in self._tasks.values() if not t.done()]
        if remaining:
            await asyncio.wait(remaining)

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
        for rt in self._runtimes.values():
            with contextlib.suppress(Exception):
                await rt.close()

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
    ) -> tuple[str, str]:
        """Create the run and hand it to the executor. Raises ConflictError when the
        conversation has an active run (in any process), NotFoundError when it does not
        exist, ShuttingDown when this process takes no new runs."""
        if not self.accepting:
            raise ShuttingDown()
        if not self._opened:
            await self.open()
        runtime_name = runtime or self.settings.runtime
        cid = conversation_id or await self.store.create_conversation(user_id, goal_title(goal))
        owner = self.instance_id if self.executor.runs_here else None
        rid = await self.store.start_run(
            user_id, cid, goal, mode, runtime_name, owner, model=model or ""
        )
        if listener is not None:
            self._listeners[rid] = listener
        if delta_listener is not None:  # live deltas of a run of this process (the CLI)
            self._delta_listeners[rid] = delta_listener
        if owner is not None:  # executed here: no need to read back what we just wrote
            self._created[rid] = {
                "run_id": rid,
                "conversation_id": cid,
                "user_id": user_id,
                "goal": goal,
                "mode": mode,
                "runtime": runtime_name,
                "status": "running",
                "owner": owner,
                "stop_requested": False,
                "model": model or "",
                "new_conversation": conversation_id is None,
            }
        try:
            await self.executor.submit(rid)
        except Exception as exc:
            log.exception("could not hand run %s to the executor", rid)
            await close_run(self, rid, "failed", f"The run could not be queued: {exc}")
            raise
        return cid, rid

    def launch(self, run_id: str) -> asyncio.Task[str]:
        """Execute a run of this instance in the background (the inline executor)."""
        task = asyncio.create_task(self.execute(run_id), name=f"run-{run_id}")
        self._tasks[run_id] = task
        task.add_done_callback(lambda t: self._after(run_id, t))
        return task

    def _after(self, run_id: str, task: asyncio.Task[str]) -> None:
        """A run task that died without ending its run (cancelled before it began, or a
        bug before the pipeline): end the run here, with its messages closed."""
        if not task.cancelled() and task.exception() is None:
            return
        if not task.cancelled():
            log.error("run %s crashed", run_id, exc_info=task.exception())
        stopped = task.cancelled()
        reason = "" if stopped else f"Internal error: {task.exception()!r}"
        self._background(self._end_abandoned(run_id, stopped, reason))

    def _background(self, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` on its own, holding a reference until it is done."""
        self._cleanups.add(task := asyncio.ensure_future(work))
        task.add_done_callback(self._cleanups.discard)

    async def _end_abandoned(self, run_id: str, stopped: bool, reason: str) -> None:
        self._contexts.pop(run_id, None)
        self._started.discard(run_id)
        try:
            await close_run(self, run_id, "stopped" if stopped else "failed", reason)
        finally:
            self.bus.mark_done(run_id)

    async def execute(self, run_id: str) -> str:
        """Run ``run_id`` here to its end: take it if it is queued, refuse it if another
        instance owns it or it already ended. Returns the final status."""
        run = self._created.pop(run_id, None) or await self.store.run_for_execution(run_id)
        if run is None or run["status"] != "running":
            return run["status"] if run else "missing"
        if run["owner"] is None:
            if not await self.store.claim_run(run_id, self.instance_id, None):
                return "taken"
            run = await self.store.run_for_execution(run_id)
            if run is None:
                return "missing"
        elif run["owner"] != self.instance_id:
            return "taken"
        ctx = RunContext(
            settings=self.settings,
            store=self.store,
            bus=self.bus,
            llm=self.llm,
            runtime=self.runtime(run["runtime"]),
            user_id=run["user_id"],
            conversation_id=run["conversation_id"],
            run_id=run_id,
            goal=run["goal"],
            mode=run["mode"],
            workspace=self.workspace(run["user_id"], run["conversation_id"]),
            listener=self._listeners.pop(run_id, None),
            delta_listener=self._delta_listeners.pop(run_id, None),
            history=[]
            if run.get("new_conversation")
            else await self._history(run["conversation_id"], run_id),
            stop_requested=bool(run["stop_requested"]),
            notifier=self.notifier,
            model=run["model"] or None,
        )
        ctx.runtime = StopCheckedRuntime(ctx.runtime, ctx)
        ctx.shutting_down = self._grace_over
        self._contexts[run_id] = ctx
        self.bus.mark_live(run_id)
        current = asyncio.current_task()
        if run_id not in self._tasks and current is not None:
            self._tasks[run_id] = current
        try:
            return await self._drive(ctx)
        finally:
            self._tasks.pop(run_id, None)

    async def _drive(self, ctx: RunContext) -> str:
        status = "failed"
        self._started.add(ctx.run_id)
        try:
            status = await run_pipeline(ctx, self.specialists)
        finally:
            ctx.live.close()  # no timer of the run's deltas outlives it
            # the end is ours to store: the lease keeper's watch must not read the stored
            # end as one from elsewhere while the run has not left this process yet
            ctx.ending = True
            try:
                if not ctx.lost:
                    error = ""
                    if ctx.shutting_down:
                        error = "The server shut down while this run was active."
                    await _uncancellable(
                        self.store.end_run(ctx.run_id, status, error, owner=self.instance_id)
                    )
            finally:
                self.bus.mark_done(ctx.run_id)
                self._contexts.pop(ctx.run_id, None)
                self._started.discard(ctx.run_id)
                canceller = self._cancellers.pop(ctx.run_id, None)
                if canceller is not None and canceller is not asyncio.current_task():
                    canceller.cancel()
        return status

    # -- stop, wait, delete ---------------------------------------------------------------
    async def stop(self, run_id: str) -> bool:
        """Record a stop request (any process); the owner stops the run. Returns False when
        the run was not running."""
        info = await self.store.request_stop(run_id)
        if info is None:
            return False
        if run_id in self._contexts:
            self._stop_local(run_id)
        elif info["owner"] is None:
            # queued and not taken by a worker yet: end it here
            if await self.store.claim_run(run_id, self.instance_id, None):
                await close_run(self, run_id, "stopped", "")
            else:
                self.notifier.control("stop", run_id)
        else:
            self.notifier.control("stop", run_id)
        return True

    def _on_control(self, kind: str, arg: str) -> None:
        if kind == "forget":
            self._background(self._forget_announced(arg))
            return
        if kind != "stop":
            return
        run_id = arg
        if run_id in self._created:  # not begun yet: it begins stopped
            self._created[run_id]["stop_requested"] = True
        if run_id in self._contexts:
            self._stop_local(run_id)

    def _stop_local(self, run_id: str, *, lost: bool = False) -> None:
        """Stop a run of this process: raise its flag and cancel its task again and again
        until it has ended (a swallowed cancellation cannot lose a stop)."""
        ctx = self._contexts.get(run_id)
        if ctx is None:
            return
        ctx.stop_requested = True
        if lost:
            ctx.lost = True
        if run_id in self._cancellers:
            return
        self._cancellers[run_id] = asyncio.create_task(
            self._cancel_until_done(run_id, ctx), name=f"stop-{run_id}"
        )

    async def _cancel_until_done(self, run_id: str, ctx: RunContext) -> None:
        while True:
            task = self._tasks.get(run_id)
            if task is None or task.done():
                return
            if run_id in self._started and not ctx.ending:
                task.cancel()
            await asyncio.wait({task}, timeout=CANCEL_REPEAT)

    def local_runs(self) -> dict[str, RunContext]:
        return dict(self._contexts)

    async def wait(self, run_id: str, timeout: float | None = None) -> str | None:  # noqa: ASYNC109
        """Wait for a run to end (on any process); its final status, or None on timeout."""
        task = self._tasks.get(run_id)
        if task is not None:
            done, _ = await asyncio.wait({task}, timeout=timeout)
            if not done:
                return None
        return await self.wait_ended(run_id, timeout)

    async def wait_ended(
        self,
        run_id: str,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> str | None:
        sub = self.bus.subscribe(run_id)
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        poll = 2.0 if self.notifier.cross_process else 0.25
        try:
            while True:
                run = await self.store.get_run(run_id)
                if run is None:
                    return None
                if run["status"] != "running":
                    return str(run["status"])
                left = poll if deadline is None else min(poll, deadline - loop.time())
                if left <= 0:
                    return None
                await self.bus.wait(run_id, sub, left)
        finally:
            self.bus.unsubscribe(run_id, sub)

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
        await self._forget(workspace)
        await anyio.to_thread.run_sync(lambda: shutil.rmtree(workspace, ignore_errors=True))
        return True

    async def _forget(self, workspace: Path) -> None:
        for runtime in list(self._runtimes.values()):
            await runtime.forget(workspace)

    async def _forget_announced(self, payload: str) -> None:
        """Another process deleted a conversation: drop its sandboxes here."""
        try:
            user_id, conversation_id, origin = json.loads(payload)
            workspace = self.workspace(str(user_id), str(conversation_id))
        except (ValueError, TypeError):
            log.warning("ignored a malformed forget notification: %.200r", payload)
            return
        if origin == self.instance_id:
            return  # ours: delete_conversation dropped them before it returned
        try:
            await self._forget(workspace)
        except Exception:
            log.exception("dropping the sandboxes of a deleted conversation failed")

    async def _history(self, cid: str, run_id: str) -> list[dict[str, str]]:
        """Earlier goals of the conversation with their answers, for follow-up goals."""
        msgs = await self.store.messages(
            cid, limit=100_000, action_types=("question", "auto_reply", "finish_summery")
        )
        turns: list[dict[str, str]] = []
        for m in msgs:
            if m.run_id == run_id:
                continue
            kind = m.meta.action_type
            if kind == "question":
                turns.append({"goal": _clip(m.content), "answer": ""})
            elif kind in ("auto_reply", "finish_summery") and turns:
                turns[-1]["answer"] = _clip(m.content)
        return turns[-HISTORY_TURNS:]


async def _uncancellable(work: Coroutine[Any, Any, T]) -> T:
    """Finish ``work`` even if the caller is cancelled meanwhile; re-raise the cancellation
    afterwards (the end of a run must be stored whatever happens)."""
    fut = asyncio.ensure_future(work)
    cancelled = False
    while True:
        try:
            result = await asyncio.shield(fut)
            break
        except asyncio.CancelledError:
            cancelled = True
            if fut.done() and fut.cancelled():
                raise
    if cancelled:
        raise asyncio.CancelledError()
    return result


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= HISTORY_CHARS else text[:HISTORY_CHARS] + "…"


def status_of(run: dict[str, Any] | None) -> str:
    return str(run["status"]) if run else "missing"
