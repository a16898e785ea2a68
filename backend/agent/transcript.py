"""What a task's model turns resend: a prompt that only grows, and the stuck-loop check.

Within a task each call's prompt is the previous call's prompt with the last turn appended
(docs/api.md "What a run costs"): a provider's prompt cache serves all of it but the new
turn. Turns go back whole until what they add up to passes CONDENSE_AT characters; then,
in one go, every turn but the last KEEP_WHOLE is condensed to a line per action (what was
done, whether it worked, the first words of its result), and the prompt grows from there
again. So the prefix breaks once per condensation, never once per call, and a call's size
stays bounded. The task itself (the head messages) is always sent, and so are, through the
condensed lines, every file written or edited and the latest error condensed (up to
ERROR_CHARS).

Where the condensations fall is a function of the turns alone (:func:`condensed_upto`):
a resumed run that rebuilds the transcript from its checkpoint's turns sends the same
prompts as the run it continues.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields
from typing import Any

from backend.actions.model import Action
from backend.actions.registry import Registry, builtin_registry
from backend.actions.registry import brief as _brief
from backend.agent.service_note import own_reply, service_note
from backend.agent.stored import PendingTurn, StoredAction, StoredTurn

KEEP_WHOLE = 2  # the last turns left whole at a condensation
# characters of turns resent that set off a condensation: CONDENSE_AT (~30k tokens) for a
# model whose input window litellm's table knows to be big enough, at most WINDOW_SHARE of
# it (4 characters a token); SMALL_CONDENSE_AT (~12k tokens) for a model it does not know
CONDENSE_AT = 120_000
SMALL_CONDENSE_AT = 48_000
WINDOW_SHARE = 0.4
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
    reply: str  # the model's reply as resent (its own words, an unusable one's too)
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
            return str(service_note(f"Format error: {self.format_error}")["content"])
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
        condense_at: int | None = None,
        actions: Registry | None = None,
    ) -> None:
        self.head = head
        self.actions = actions or builtin_registry()
        self.turns: list[Turn] = []
        self.keep_whole = KEEP_WHOLE if keep_whole is None else keep_whole
        self.condense_at = CONDENSE_AT if condense_at is None else condense_at

    def add(self, turn: Turn) -> None:
        self.turns.append(turn)

    def messages(self) -> list[dict[str, Any]]:
        out = list(self.head)
        # what earlier tasks left in the head counts against the threshold as sent whole
        earlier = _size(self.head[2:])
        upto = condensed_upto(self.turns, self.keep_whole, self.condense_at, earlier, self.actions)
        for pair in _condensed(self.turns[:upto], self.actions):
            out.extend(pair)
        for turn in self.turns[upto:]:
            out.extend(_whole(turn))
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


def _whole(turn: Turn) -> list[dict[str, Any]]:
    if turn.format_error:  # the model's own unusable reply, then the service's note on it
        return [*own_reply(turn.reply), {"role": "user", "content": turn.observation()}]
    return [
        {"role": "assistant", "content": turn.reply},
        {"role": "user", "content": turn.observation()},
    ]


def _condensed(turns: list[Turn], actions: Registry) -> list[list[dict[str, Any]]]:
    """The condensed turns; the last failed one keeps its error (up to ERROR_CHARS). An
    unusable reply and the service's note on it are left out once condensed (what the model
    was told to fix mattered while it was fresh)."""
    last_failed = max((i for i, t in enumerate(turns) if t.failed), default=-1)
    return [
        [
            {"role": "assistant", "content": turn.condensed_reply(actions)},
            {"role": "user", "content": turn.condensed_observation(actions, i == last_failed)},
        ]
        for i, turn in enumerate(turns)
        if not turn.format_error
    ]


def _size(messages: list[dict[str, Any]]) -> int:
    return sum(len(m["content"]) for m in messages)


def condensed_upto(
    turns: list[Turn], keep_whole: int, condense_at: int, earlier: int, actions: Registry
) -> int:
    """How many of ``turns`` are sent condensed: replays the turns as they were added and
    condenses, in one go, all but the last ``keep_whole`` whenever what the turns add up
    to (after ``earlier`` characters carried from earlier tasks) passes ``condense_at``."""
    upto = 0
    condensed = earlier  # characters of the condensed turns (and of what was carried)
    whole = 0  # characters of the turns sent whole
    for i, turn in enumerate(turns):
        whole += _size(_whole(turn))
        cut = i + 1 - keep_whole
        if condensed + whole > condense_at and cut > upto:
            upto = cut
            condensed = earlier + sum(_size(pair) for pair in _condensed(turns[:upto], actions))
            whole = sum(_size(_whole(t)) for t in turns[upto : i + 1])
    return upto


def condense_at(window: int | None) -> int:
    """The condensation threshold (characters) for a model with an input ``window`` of that
    many tokens (None: not known)."""
    if window is None:
        return min(SMALL_CONDENSE_AT, CONDENSE_AT)
    return max(SMALL_CONDENSE_AT // 4, min(CONDENSE_AT, int(window * 4 * WINDOW_SHARE)))


def carried(transcript: Transcript, finishing_reply: str) -> list[dict[str, Any]] | None:
    """What the next task's prompt goes on from: this task's last prompt and the reply that
    finished it, when they take up at most half of CONDENSE_AT (else the next task starts
    over from the system prompt: a condensation, in one go)."""
    out = [*transcript.messages(), {"role": "assistant", "content": finishing_reply}]
    return out if _size(out[2:]) <= transcript.condense_at // 2 else None


def describe(actions: Registry, action: Action) -> str:
    """One line saying what an action did (its registry definition says how)."""
    defn = actions.get(action.type)
    return defn.shown.describe(action) if defn else action.type


def _rereadable(actions: Registry, label: str) -> bool:
    """Whether the action an outcome's label names gives a result that is condensed to
    its size once old (read_file: the model reads the file again)."""
    defn = actions.get(label.split(" ", 1)[0].rstrip(":"))
    return defn is not None and defn.handling.rereadable


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
