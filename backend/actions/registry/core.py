"""The action registry: each action is one :class:`ActionDef` in one module, and a
:class:`Registry` is the actions one process offers.

A definition carries everything the rest of the code needs to know about an action: its
spec for the parser and the prompt, its handler, its label and running text, its approval
class (docs/api.md "Runs that wait for a person"), its stream kind and how it shows in the CLI and
the transcript. The loop dispatches through the run's registry (``RunDeps.actions``); nothing
else switches on action names (a test scans backend/ for it), and the wire's enumerations of
kinds and action names are made from the definitions (:mod:`backend.actions.registry.wire`).

    ACTION = ActionDef(spec=ActionSpec(...), kind="my_kind", handler=run_it)
    registry = Registry([*builtin_registry().defs(), ACTION])   # a registry of its own

A registry never changes once made: a test that adds an action makes its own, and the
builtin one (and every other test's) keeps its actions.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from backend.actions.model import Action, ActionSpec
from backend.actions.vocabulary import Vocabulary
from backend.messages.payloads import read_payload
from backend.observe.calls import ActionRun

if TYPE_CHECKING:
    from backend.runtime.base import ActionResult, OutputCallback, Runtime
    from backend.tools.kit import Tools


@dataclass
class Done:
    """An action's result: words for the model and the person, data for the stream."""

    status: str  # "success" | "failure"
    content: str
    filepath: str = ""  # the workspace file it touched (meta.filepath)
    url: str = ""  # the address it read (meta.url)
    data: list[BaseModel] = field(default_factory=list)  # meta.json: its ActionDef.payload

    @property
    def ok(self) -> bool:
        return self.status == "success"

    @classmethod
    def of(cls, result: ActionResult, payload: type[BaseModel] | None = None) -> Done:
        """A runtime's result; its data (what the cards show) read as ``payload``."""
        data = [payload.model_validate(d) for d in result.data] if payload else []
        return cls(result.status, result.content, result.filepath, data=data)


@dataclass
class ActionContext:
    """What a handler is given: the run's sandbox and the tools this process offers."""

    runtime: Runtime
    workspace: Path
    tools: Tools | None = None
    on_output: OutputCallback | None = None  # live output (``Handling.streams_output``)
    mcp_servers: list[str] | None = None  # the run's pick (None: every configured server)
    can_ask: bool = False  # someone can answer the model's questions (ask_user is offered)


@dataclass
class Offer:
    """An action as offered for one task: extra prompt text (e.g. an MCP server's tools)
    and problems the run names once in its stream as a quiet notice (a server it picked
    that is down), by what they are about."""

    note: str = ""
    problems: dict[str, str] = field(default_factory=dict)
    available: bool = True  # False: only its problems are named, the prompt leaves it out


Handler = Callable[[ActionContext, Action], Awaitable[Done]]
OfferFn = Callable[[ActionContext], Awaitable[Offer | None]]


def brief(text: str, limit: int) -> str:
    """``text`` stripped, its middle cut when longer than ``limit``."""
    text = text.strip()
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]} […] {text[-half:]}"


def fold(lines: list[str], keep: int, *, tail: bool = False) -> list[str]:
    """At most ``keep`` of ``lines`` (the first, or the last with ``tail``) and a line
    saying how many more there are."""
    if len(lines) <= keep:
        return lines
    more = len(lines) - keep
    if tail:
        return [f"[… {more} lines above …]", *lines[-keep:]]
    return [*lines[:keep], f"[… {more} more lines …]"]


def _path_label(action: Action) -> str:
    path = action.params.get("path")
    return f"{action.type} {path}" if path is not None else action.type


@dataclass(frozen=True)
class Shown:
    """How an action is shown: the model's observation, its `running` message, the
    transcript, `planact run`, LemonAI and the prompt's order."""

    label: Callable[[Action], str] = _path_label  # how the model's observation names it
    running: Callable[[Action], str] = lambda a: a.type  # its `running` message's content
    describe: Callable[[Action], str] = lambda a: a.type  # one line: what it did
    # how `planact run` prints its result (content, meta.json read as its ``payload``
    # models: each show takes a list of its own model); None: the content itself. Its first
    # line is the head (all that is printed when a command's output was already printed live)
    show: Callable[[str, list[Any]], str] | None = None
    shows_failure: bool = False  # ``show`` prints its failures too (a failed command)
    lemonai: str | None = None  # LemonAI's action type for it (None: the stream kind)
    order: int = 100  # where the prompt lists it


@dataclass(frozen=True)
class Handling:
    """How the task loop treats an action: when it is offered, whether a person approves
    it, and its traits."""

    # None: always offered; else the Offer for a task (None from it: not offered here)
    offer: OfferFn | None = None
    # docs/api.md "Runs that wait for a person": "edits", "terminal", "web", "mcp", or None
    # (never asks)
    approval: str | None = None
    # what a person approving it is shown (backend/agent/asking.py): "command" (its command,
    # whole), "diff" (the file change: the new ``spec.whole_file`` text, else old_str ->
    # new_str), or "" (its params, one a line)
    approval_view: str = ""
    rereadable: bool = False  # an old success is condensed to its size (read it again)
    writes_files: bool = False  # a success changes the file in Done.filepath
    streams_output: bool = False  # gets live output deltas (terminal_run, mcp_tool progress)
    # its live output is its result's output (a command's stdout/stderr: `planact run` then
    # prints only the result's head); else live output is progress (an MCP tool's)
    output_is_result: bool = False
    # its result is the person's answer: where someone can answer, the task loop parks the run
    # on the question (backend/agent/asking.py) instead of calling the handler
    asks_person: bool = False
    ends_task: bool = False  # `finish`: no running message, its content is the task's note


@dataclass(frozen=True)
class ActionDef:
    """One action. Every action says three things: its ``spec`` (name, parameters, example:
    what the parser reads and the prompt shows), its stream ``kind`` and its ``handler``.
    The rest is optional: what its messages carry (``payload``), how it is ``shown``
    (:class:`Shown`) and the task loop's ``handling`` of it (:class:`Handling`)."""

    spec: ActionSpec
    kind: str  # the stream's meta.action_type of its messages
    handler: Handler
    # the models of its messages' meta.json (backend/messages/payloads.py); () carries
    # nothing. Its handler's Done.data are these.
    payload: tuple[type[BaseModel], ...] = ()
    shown: Shown = Shown()
    handling: Handling = Handling()

    @property
    def name(self) -> str:
        return self.spec.name


class Registry:
    """The actions one process offers, in prompt order (built from modules by
    :func:`backend.actions.registry.load`). It never changes: :meth:`with_actions` makes
    another."""

    def __init__(self, defs: Iterable[ActionDef] = ()) -> None:
        self._defs: dict[str, ActionDef] = {}
        for defn in sorted(defs, key=lambda d: (d.shown.order, d.name)):
            if defn.name in self._defs:
                raise ValueError(f"two actions are named {defn.name!r}")
            self._defs[defn.name] = defn
        self.vocabulary = Vocabulary(
            (d.spec for d in self._defs.values()),
            (d.spec for d in self._defs.values() if d.handling.offer is None),
        )

    def with_actions(self, *added: ActionDef) -> Registry:
        """Another registry: these actions added (one of the same name replaced)."""
        names = {d.name for d in added}
        return Registry([*(d for d in self._defs.values() if d.name not in names), *added])

    def without(self, *names: str) -> Registry:
        """Another registry: these actions left out."""
        return Registry(d for d in self._defs.values() if d.name not in names)

    def get(self, name: str) -> ActionDef | None:
        return self._defs.get(name)

    def defs(self) -> list[ActionDef]:
        return list(self._defs.values())

    def names(self) -> list[str]:
        return list(self._defs)

    def by_kind(self, kind: str) -> ActionDef | None:
        """The action whose messages carry stream ``kind`` (the first in prompt order)."""
        return next((defn for defn in self._defs.values() if defn.kind == kind), None)

    def kinds(self) -> list[str]:
        """Every action's stream kind, in prompt order, each once (the wire enumeration's
        action part)."""
        return list(dict.fromkeys(defn.kind for defn in self._defs.values()))

    def payload_of(self, kind: str) -> tuple[type[BaseModel], ...]:
        """The models of what messages of the action stream ``kind`` carry in meta.json (the
        first action with that kind, as :meth:`by_kind`); () for a kind no action has."""
        defn = self.by_kind(kind)
        return defn.payload if defn else ()

    def kind_of(self, name: str) -> str:
        defn = self._defs.get(name)
        return defn.kind if defn else name

    def lemonai_type(self, kind: str) -> str:
        """LemonAI's action type for messages of stream ``kind``: the one its client draws."""
        defn = self.by_kind(kind)
        return (defn.shown.lemonai or defn.kind) if defn else kind

    def show(
        self, kind: str, content: str, data: Iterable[object], *, failed: bool = False
    ) -> str | None:
        """How `planact run` prints a result of the action with stream ``kind`` (None: as any
        message; a failure only when its ``Shown.shows_failure``). ``data`` (meta.json as
        stored) reaches its ``show`` read as the action's payload models; an item that is none
        of them is passed over."""
        for defn in self._defs.values():
            shown = defn.shown
            if defn.kind == kind and shown.show is not None and (shown.shows_failure or not failed):
                return shown.show(content, read_payload(data, defn.payload))
        return None

    async def offered(self, ctx: ActionContext) -> list[tuple[ActionDef, Offer]]:
        """The actions offered for one task, in prompt order, with their offers."""
        out: list[tuple[ActionDef, Offer]] = []
        for defn in self._defs.values():
            offer = defn.handling.offer
            if offer is None:
                out.append((defn, Offer()))
                continue
            got = await offer(ctx)
            if got is not None:  # (an offer that is not available still names its problems)
                out.append((defn, got))
        return out

    async def execute(self, ctx: ActionContext, action: Action) -> Done:
        """``action`` through its handler, with its metrics (and its span when traced)."""
        defn = self._defs.get(action.type)
        if defn is None:
            return Done("failure", f"Unknown action {action.type!r}.")
        seen = ActionRun(defn.name)
        try:
            done = await defn.handler(ctx, action)
        except BaseException as exc:
            seen.ended("error", exc)
            raise
        seen.ended(done.status)
        return done
