"""What a task's model turns resend: lean history and the stuck-loop check.

Every turn is kept, but only the last KEEP_WHOLE turns go back to the model as they were;
older ones are condensed to a line per action (what was done, whether it worked, the first
words of its result), so a call's size grows by a few hundred characters per turn instead
of by each turn's whole output. The task itself (the head messages) is always sent, and so
are the latest error (up to ERROR_CHARS) and, through the condensed lines, every file
written or edited. A turn is condensed once, when it leaves the window, so the prefix of
the conversation stays stable for providers' prompt caches.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields
from typing import Any

from backend.actions.model import Action
from backend.actions.registry import Registry, builtin_registry
from backend.actions.registry import brief as _brief
from backend.agent.stored import PendingTurn, StoredAction, StoredTurn

KEEP_WHOLE = 2  # the last turns resent whole
BRIEF_CHARS = 240  # of each older action result
ERROR_CHARS = 2_000  # of the latest failure, when it is older than the window
STUCK_REPEATS = 3  # the same action with the same result this many turns in a row ends the task

_NUMBERS = re.compile(r"\d+")


@dataclass
class Outcome:
    """One action's result as the model sees it."""

    label: str
    verdict: str  # "ok" | "FAILED" | "skipped" | "warning"
    content: str = ""


@dataclass
class Turn:
    reply: str  # the model's reply as resent (a placeholder for an unusable one)
    actions: list[Action] = field(default_factory=list)
    outcomes: list[Outcome] = field(default_factory=list)
    footer: str = ""  # the closing line of the observation
    format_error: str = ""  # the message for the model when the reply had no usable action
    brief_error: str = ""  # the same in a few words

    @property
    def failed(self) -> bool:
        return bool(self.format_error) or any(o.verdict == "FAILED" for o in self.outcomes)

    def observation(self) -> str:
        if self.format_error:
            return f"Format error: {self.format_error}"
        parts = [
            f"[{o.label}] {o.verdict}" + (f"\n{o.content}" if o.content else "")
            for o in self.outcomes
        ]
        return "\n\n".join([*parts, self.footer] if self.footer else parts)

    def signature(self) -> tuple[Any, ...]:
        """Same actions with the same results (numbers ignored: timings, pids)."""
        acts = tuple((a.type, tuple(sorted(a.params.items()))) for a in self.actions)
        results = tuple((o.verdict, _NUMBERS.sub("#", o.content)) for o in self.outcomes)
        return (acts, results)

    def condensed_reply(self, actions: Registry) -> str:
        if self.format_error:
            return "(earlier reply, condensed: it had no usable action)"
        return "(earlier reply, condensed) " + "; ".join(describe(actions, a) for a in self.actions)

    def condensed_observation(self, actions: Registry, keep_error: bool) -> str:
        if self.format_error:
            return f"(condensed) Format error: {self.brief_error}"
        lines = []
        for o in self.outcomes:
            limit = ERROR_CHARS if keep_error and o.verdict == "FAILED" else BRIEF_CHARS
            if _rereadable(actions, o.label) and o.verdict == "ok" and not keep_error:
                body = f"({len(o.content):,} characters read; read the file again to see them)"
            else:
                body = _brief(o.content, limit)
            lines.append(f"[{o.label}] {o.verdict}" + (f": {body}" if body else ""))
        return "(condensed) " + "\n".join(lines)


class Transcript:
    """A task's conversation with the model (``actions``: the run's registry, which says
    how an older turn's actions are condensed; None: the builtin one)."""

    def __init__(
        self,
        head: list[dict[str, Any]],
        keep_whole: int | None = None,
        actions: Registry | None = None,
    ) -> None:
        self.head = head
        self.actions = actions or builtin_registry()
        self.turns: list[Turn] = []
        self.keep_whole = KEEP_WHOLE if keep_whole is None else keep_whole

    def add(self, turn: Turn) -> None:
        self.turns.append(turn)

    def messages(self) -> list[dict[str, Any]]:
        out = list(self.head)
        n = len(self.turns)
        last_failed = max((i for i, t in enumerate(self.turns) if t.failed), default=-1)
        for i, turn in enumerate(self.turns):
            if i >= n - self.keep_whole:
                out.append({"role": "assistant", "content": turn.reply})
                out.append({"role": "user", "content": turn.observation()})
            else:
                out.append({"role": "assistant", "content": turn.condensed_reply(self.actions)})
                observation = turn.condensed_observation(self.actions, i == last_failed)
                out.append({"role": "user", "content": observation})
        return out

    def repeats(self) -> int:
        """How many turns in a row, up to the last one, did the same thing with the same
        result (1 when the last turn is new)."""
        if not self.turns or not self.turns[-1].actions:
            return 0
        last = self.turns[-1].signature()
        count = 0
        for turn in reversed(self.turns):
            if not turn.actions or turn.signature() != last:
                break
            count += 1
        return count


def describe(actions: Registry, action: Action) -> str:
    """One line saying what an action did (its registry definition says how)."""
    defn = actions.get(action.type)
    return defn.describe(action) if defn else action.type


def _rereadable(actions: Registry, label: str) -> bool:
    """Whether the action an outcome's label names gives a result that is condensed to
    its size once old (read_file: the model reads the file again)."""
    defn = actions.get(label.split(" ", 1)[0].rstrip(":"))
    return defn is not None and defn.rereadable


# -- a turn as JSON (checkpoints: a resumed run rebuilds its transcript from them) -------


def stored_turn(turn: Turn) -> StoredTurn:
    """The turn as a checkpoint keeps it."""
    return StoredTurn(
        reply=turn.reply,
        actions=[
            StoredAction(type=a.type, params=dict(a.params), warnings=list(a.warnings))
            for a in turn.actions
        ],
        outcomes=[(o.label, o.verdict, o.content) for o in turn.outcomes],
        footer=turn.footer,
        format_error=turn.format_error,
        brief_error=turn.brief_error,
    )


def pending_turn(turn: Turn, after_seq: int) -> PendingTurn:
    """The turn whose actions run, as a checkpoint keeps it."""
    stored = stored_turn(turn)
    return PendingTurn(
        **{f.name: getattr(stored, f.name) for f in fields(stored)}, after_seq=after_seq
    )


def turn_from(stored: StoredTurn) -> Turn:
    return Turn(
        reply=stored.reply,
        actions=[Action(a.type, dict(a.params), list(a.warnings)) for a in stored.actions],
        outcomes=[Outcome(*o) for o in stored.outcomes],
        footer=stored.footer,
        format_error=stored.format_error,
        brief_error=stored.brief_error,
    )
