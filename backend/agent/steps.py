"""The steps of one turn: each action the model asked for, on its way to run, and what a
turn that waits for a person needs to go on.

A turn resumed after a wait (``ctx.answer``, ``state.wait.index``) passes over the
actions that ran before it waited (their outcomes are in the turn already) and goes on with
the answer at the action it waited on. An action that needs a person asks first (a
question, an approval): the run parks (backend/agent/asking.py) and the answer resumes it
here. Once an action failed, the later ones are skipped. The task loop
(backend/agent/task_loop.py) runs what the steps let through."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from backend.actions.model import Action
from backend.actions.values import scrub
from backend.agent.asking import (
    NOT_AS_APPROVED,
    approved_as_shown,
    ask_approval,
    ask_question,
    rejection,
)
from backend.agent.transcript import Outcome, Turn, turn_from
from backend.messages.message import Message
from backend.runtime.base import cap_text
from backend.store.parked import WaitAnswer
from backend.waits.classes import asks

if TYPE_CHECKING:
    from backend.actions.registry import Done
    from backend.agent.context import RunContext

OBSERVATION_CAP = 12_000  # characters of an action's result the model reads
SKIPPED = "Skipped: an earlier action in the same reply failed."
FAILED_FOOTER = "An action failed; fix the problem and continue."
OK_FOOTER = "All actions ran. Continue, or <finish> when the task is done."


def waited_turn(ctx: RunContext) -> Turn | None:
    """The turn a run resumed after a wait goes on with (from the action it waited on), or
    None when it did not wait."""
    pending = ctx.state.pending
    if ctx.answer is None or pending is None:
        return None
    turn = turn_from(pending)
    ctx.turn, ctx.turn_after = turn, pending.after_seq
    return turn


class Steps:
    """The actions of ``turn`` (of the task ``task_id``) as steps, from where the turn goes
    on; ``failed``: an action failed (the later ones are skipped)."""

    def __init__(self, ctx: RunContext, task_id: str, turn: Turn) -> None:
        self.ctx, self.task_id, self.turn = ctx, task_id, turn
        self.failed = False

    def walk(self, actions: list[Action]) -> Iterator[Step]:
        """A step per action, from the one the run waited on (with the answer) when it
        goes on after a wait, else from the first."""
        ctx, state = self.ctx, self.ctx.state
        waited = state.wait.index if state.wait is not None and ctx.answer is not None else -1
        for index, action in enumerate(actions):
            if index < waited:  # ran before the run waited (their outcomes are in the turn)
                continue
            answer = ctx.answer if index == waited else None
            if answer is not None:  # used now: a later checkpoint goes on without it
                state.wait, ctx.answer = None, None
            yield Step(self, index, action, answer)

    def end(self) -> None:
        """Every action had its step: what the model reads after their outcomes."""
        self.turn.footer = FAILED_FOOTER if self.failed else OK_FOOTER


class Step:
    """One action of a turn: its definition, label and message kind; ``answer``: what the
    person answered when the run waited on it (None: it did not)."""

    def __init__(self, steps: Steps, index: int, action: Action, answer: WaitAnswer | None) -> None:
        self.steps, self.index, self.action, self.answer = steps, index, action, answer
        self.task_id = steps.task_id
        self.defn = defn = steps.ctx.deps.actions.get(action.type)
        self.label = scrub(defn.shown.label(action)) if defn else action.type
        self.kind: str = defn.kind if defn else action.type

    @property
    def ends_task(self) -> bool:
        return self.defn is not None and self.defn.handling.ends_task

    def _outcome(self, verdict: str, text: str, *, failed: bool) -> None:
        self.steps.turn.outcomes.append(Outcome(self.label, verdict, text))
        self.steps.failed = failed

    async def skip(self) -> None:
        """An earlier action failed: this one is not run, and says so."""
        await self.steps.ctx.publish(
            Message.build(
                self.kind,
                SKIPPED,
                status="failure",
                task_id=self.task_id,
                filepath=self.action.params.get("path", ""),
                meta_content=self.label,
            )
        )
        self._outcome("skipped", "(an earlier action failed)", failed=True)

    async def cleared(self) -> bool:
        """Whether the action runs now. One that needs a person asks (the run parks: this
        does not return); with the answer, a question's outcome is the answer, and an action
        the person did not approve (as shown) gets its failure instead of running."""
        ctx, action, answer = self.steps.ctx, self.action, self.answer
        state = ctx.state
        if answer is None:  # (a resumed action's warnings were noted before it waited)
            for warning in action.warnings:
                self.steps.turn.outcomes.append(Outcome(self.label, "warning", warning))
        asks_person = self.defn is not None and self.defn.handling.asks_person
        if asks_person and (state.can_ask or answer is not None):
            if answer is None:
                await ask_question(ctx, self.task_id, action, self.index)
            ok = answer.decision == "answer"
            text = answer.answer if ok else rejection(answer)
            self._outcome("ok" if ok else "FAILED", scrub(text), failed=not ok)
            return False
        action_class = self.defn.handling.approval if self.defn is not None else None
        if answer is None and asks(state.approval, action_class, state.approved_classes):
            await ask_approval(ctx, self.task_id, action, str(action_class), self.index)
        if answer is None:
            return True
        if answer.decision == "approve_all" and action_class:
            state.approved_classes.append(action_class)
        if answer.decision not in ("approve", "approve_all"):
            self._outcome("FAILED", rejection(answer), failed=True)
            return False
        if not approved_as_shown(action, answer):  # never: guarded
            await ctx.publish(
                Message.build(self.kind, NOT_AS_APPROVED, status="failure", task_id=self.task_id)
            )
            self._outcome("FAILED", NOT_AS_APPROVED, failed=True)
            return False
        return True

    def ran(self, done: Done) -> None:
        """The action ran: its result is the model's to read."""
        verdict = "ok" if done.ok else "FAILED"
        self._outcome(verdict, cap_text(done.content, OBSERVATION_CAP), failed=not done.ok)
