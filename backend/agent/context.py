"""RunContext: one run as its stages see it. ``deps`` (given by the executing process),
``state`` (the run's choices and progress: plain, serialisable), ``control`` (stop flags
set by the owner), and the two things stages do: publish messages and call the model."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from backend.agent.control import RunControl, RunStopped
from backend.agent.deps import RunDeps
from backend.agent.live import DeltaSink, Live
from backend.agent.publisher import Publisher
from backend.agent.state import RunState
from backend.agent.stored import StoredReply
from backend.agent.transcript import Transcript, Turn, pending_turn, stored_turn, turn_from
from backend.llm.base import Completion, DeltaCallback, LLMError
from backend.llm.caching import keyed
from backend.messages.deltas import DeltaEvent
from backend.messages.kinds import MessageKind
from backend.messages.message import Message
from backend.messages.paths import relative_paths, relative_paths_in
from backend.observe.runtrace import RunTrace
from backend.store.base import RunNotOwned
from backend.store.parked import NewWait, WaitAnswer

if TYPE_CHECKING:
    from backend.checkpoints.run import RunCheckpoints

log = logging.getLogger(__name__)


async def _drain_deltas(live: Live) -> bool:
    """Send the pending live deltas (best effort). Returns True when the run was cancelled
    meanwhile: the caller still stores its message, then lets the cancellation through."""
    try:
        await live.drain()
    except asyncio.CancelledError:
        return True
    except Exception as exc:
        log.warning("could not send live deltas: %s", exc)
    return False


@dataclass
class RunContext:
    deps: RunDeps
    state: RunState
    publisher: Publisher
    control: RunControl
    # live deltas (docs/api.md "The stream"): coalesced, to the notifier and `delta_listener`
    # (the CLI); made only while someone follows the run
    delta_listener: DeltaSink | None = None
    live: Live = field(default_factory=Live)
    # the current task's transcript and turn (task_loop.py hands them over), checkpointed
    transcript: Transcript | None = None
    turn: Turn | None = None
    turn_after: int = 0  # the seq of the last message before the current turn
    resumed: bool = False  # taken over from a checkpoint another process stored
    replay_reply: bool = False  # resumed: the stored model reply is used, not asked again
    replay_skip: int = 0  # messages the replayed reply had already published
    # resumed after a wait: the answer (backend/waits) the parked action goes on with
    answer: WaitAnswer | None = None
    # the run's trace when traces are on (backend/observe): stages and tasks from messages
    trace: RunTrace | None = None
    # run fields written with the next checkpoint (store_with_next_checkpoint)
    unsaved_fields: dict[str, str] = field(default_factory=dict)
    # the workspace's checkpoints after each action and at the end (backend/checkpoints)
    checkpoints: RunCheckpoints | None = None

    def __post_init__(self) -> None:
        self.live = Live(
            self.delta_listener,
            wanted=self._wants_deltas,
            publish=self.publish_delta,
            publish_now=self.publish_delta_now,
        )

    @property
    def run_id(self) -> str:
        return self.state.run_id

    def check_stop(self) -> None:
        self.control.check_stop()

    async def publish_delta(self, delta: DeltaEvent) -> None:
        """A live, unstored delta (see docs/api.md "The stream") to every reader of the run."""
        if not self.control.lost:
            await self.deps.notifier.publish_delta(self.run_id, delta)

    def publish_delta_now(self, delta: DeltaEvent) -> bool:
        """The same at once when the notifier can (no other process to tell): True; else
        False and nothing done (it goes through :meth:`publish_delta`)."""
        if self.control.lost:
            return True
        return self.deps.notifier.publish_delta_now(self.run_id, delta)

    def _wants_deltas(self) -> bool:
        if self.delta_listener is not None:
            return True
        notifier = self.deps.notifier
        return bool(notifier.cross_process) or notifier.bus.has_readers(self.run_id)

    async def publish(self, msg: Message, wait: NewWait | None = None) -> Message:
        """Through the run's Publisher (store first, then notify); the message's pending
        live deltas go out before it, and the run keeps track of what it left open.
        ``wait``: the run parks on this message (stored with it, backend/agent/asking.py)."""
        if msg.role == "assistant":  # never show the server's workspace path
            msg.content = relative_paths(msg.content, self.state.workspace)
            msg.meta.content = relative_paths(msg.meta.content, self.state.workspace)
            if msg.meta.json_:  # a command's streams, a written file's content
                msg.meta.json_ = relative_paths_in(msg.meta.json_, self.state.workspace)
        if self.control.lost:  # another process ended this run: its messages are closed
            msg.conversation_id, msg.run_id = self.state.conversation_id, self.run_id
            return msg
        if self.replay_skip > 0:  # stored before the run was resumed
            self.replay_skip -= 1
            msg.conversation_id, msg.run_id = self.state.conversation_id, self.run_id
            return msg
        if self.trace is not None:
            self._traced(msg)
        # to other processes too, whose notification of the message is sent when stored
        self.live.flush(msg.uuid)
        cancelled = await _drain_deltas(self.live)
        self._track(msg)  # the checkpoint stored with the message already counts it
        if self.state.reply is not None:
            self.state.reply_published += 1
        try:
            return await self.publisher.publish(
                msg,
                self._stored,
                cancelled=cancelled,
                checkpoint=self.checkpoint(),
                wait=wait,
                run_fields=self._take_unsaved_fields(),
            )
        except RunNotOwned:
            raise self._taken_over() from None

    def _taken_over(self) -> RunStopped:
        """A fenced write found the run owned elsewhere: this process stalled past its
        lease and another one took the run over (or it ended elsewhere). Nothing more is
        written here; the run ends in this process without a word."""
        log.warning(
            "run %s: another process owns it now (this one's lease had expired); "
            "dropping it here without writing",
            self.run_id,
        )
        self.control.lost = self.control.stop_requested = True
        return RunStopped(self.run_id)

    def _traced(self, msg: Message) -> None:
        """The run's stage and task spans follow its checkpoint stage and task messages."""
        assert self.trace is not None
        self.trace.stage(self.state.stage)
        if msg.meta.action_type == MessageKind.TASK:
            self.trace.task(str(msg.meta.task_id), msg.status, msg.content)

    def _track(self, msg: Message) -> None:
        state = self.state
        if msg.meta.action_type == MessageKind.TASK:  # tasks pair by task id
            if msg.status == "running":
                state.open_tasks.add(str(msg.meta.task_id))
            else:
                state.open_tasks.discard(str(msg.meta.task_id))
        elif msg.status == "running":
            state.open_actions[msg.uuid] = msg
        else:
            state.open_actions.pop(msg.uuid, None)

    def _stored(self, stored: Message) -> None:
        if stored.status == "running" and stored.uuid in self.state.open_actions:
            self.state.open_actions[stored.uuid] = stored
        if stored.seq is not None:
            self.state.last_seq = stored.seq
        self.live.published(stored)

    # -- checkpoints (agent/resume.py) ------------------------------------------------------
    def checkpoint(self) -> str:
        """The run's state as stored at a step boundary: a resumed run goes on from it."""
        state = self.state
        state.budget.settle()
        if self.transcript is not None:
            state.turns = [stored_turn(t) for t in self.transcript.turns]
            turn = self.turn
            if turn is not None and not any(t is turn for t in self.transcript.turns):
                state.pending = pending_turn(turn, self.turn_after)
            else:
                state.pending = None
        return state.to_json()

    def store_with_next_checkpoint(self, **fields: str) -> None:
        """Run fields (``start_files``, ``task_type``: store.runs.RUN_FIELDS) written in the
        UPDATE of the run's next checkpoint (before its next model call, or with its next
        message) rather than a transaction of their own. Nothing reads them before: a run
        resumed from an earlier checkpoint goes on from a step that sets them again."""
        self.unsaved_fields.update(fields)

    def _take_unsaved_fields(self) -> dict[str, str] | None:
        fields, self.unsaved_fields = self.unsaved_fields, {}
        return fields or None

    async def save_checkpoint(self) -> None:
        """Before a model call: the checkpoint and the task's finished turns."""
        if not self.control.lost:
            checkpoint = self.checkpoint()
            try:
                await self.deps.store.save_checkpoint(
                    self.run_id,
                    checkpoint,
                    self.state.turns_json(),
                    self.publisher.owner,
                    self._take_unsaved_fields(),
                )
            except RunNotOwned:
                raise self._taken_over() from None

    def begin_task(self, transcript: Transcript) -> None:
        """The task loop's transcript: restored as it was when the task is resumed."""
        state = self.state
        self.transcript, self.turn = transcript, None
        if state.task_head is not None:
            transcript.head = list(state.task_head)
            transcript.turns = [turn_from(t) for t in state.turns]
        else:
            state.task_head = list(transcript.head)

    def begin_turn(self, turn: Turn) -> None:
        """A model reply was parsed into ``turn``: its actions run now."""
        self.turn, self.turn_after = turn, self.state.last_seq
        self.state.reply = None

    def end_task(self) -> None:
        state = self.state
        self.transcript = self.turn = None
        state.task_head, state.turns, state.pending = None, [], None

    def thinking_model(self) -> str:
        """The model the task loop's calls go to (as :meth:`call_model` picks it)."""
        state = self.state
        if state.model:
            return state.model
        if state.specialist and state.specialist.model:
            return state.specialist.model
        return self.deps.llm.default_model or ""

    async def call_model(
        self,
        stage: str,
        messages: list[dict[str, Any]],
        *,
        specialist: bool = False,
        on_delta: DeltaCallback | None = None,
    ) -> Completion:
        """Call the model for ``stage``; the specialist's model when asked, falling back to
        the default model if it errors. Usage is recorded per stage. Raises BudgetExceeded
        when a run budget is used up."""
        state, llm = self.state, self.deps.llm
        self.check_stop()
        self.control.check_hand_over()
        if self.replay_reply and state.reply is not None and state.reply_stage == stage:
            self.replay_reply = False  # resumed: this reply was had and paid for already
            self.replay_skip = state.reply_published
            return Completion(**state.reply.model_dump())
        self.replay_reply = False
        state.budget.check(self.deps.settings)
        state.in_flight, state.reply = stage, None
        await self.save_checkpoint()
        if self.trace is not None:
            self.trace.stage(state.stage)
        model = state.specialist.model if (specialist and state.specialist) else None
        if state.model:  # a model the person picked wins, with no silent fallback
            model = state.model
        with keyed(state.conversation_id):  # the prompt cache key, where a provider takes one
            try:
                completion = await llm.complete(
                    stage=stage, messages=messages, model=model, on_delta=on_delta
                )
            except LLMError as exc:  # also a misconfigured specialist model
                if not model or model == llm.default_model or model == state.model:
                    raise
                log.warning("specialist model %s failed (%s); using the default", model, exc)
                self.check_stop()
                completion = await llm.complete(stage=stage, messages=messages, on_delta=on_delta)
        state.budget.add(completion)
        state.in_flight, state.reply_stage, state.reply_published = "", stage, 0
        state.reply = StoredReply(
            text=completion.text,
            model=completion.model,
            finish_reason=completion.finish_reason,
            tool_calls=completion.tool_calls,
            reasoning=completion.reasoning,
        )
        await self.deps.store.record_usage(
            state.conversation_id,
            self.run_id,
            stage,
            completion.model or model or llm.default_model or "",
            completion.prompt_tokens,
            completion.completion_tokens,
            completion.cost,
            cached_input_tokens=completion.cached_input_tokens,
            cache_write_tokens=completion.cache_write_tokens,
        )
        return completion
