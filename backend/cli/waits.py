"""`planact run` answers its run's approvals and questions on the terminal (docs/api.md "Runs that
wait for a person").

The run publishes an ``approval`` or ``ask_user`` message and parks; the CLI shows what will
happen (the command, or the diff of an edit) or the question, reads the person's line and
answers through backend/waits (in this process, no HTTP): the run manager resumes the run
here. EOF (Ctrl-D) at a prompt stops the run; Ctrl-C does the same (the caller's
cancellation). A wait answered elsewhere (another process, a timeout) drops its prompt.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import termios
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

from backend.cli.words import show_command, size_line
from backend.messages.kinds import MessageKind
from backend.messages.message import Message
from backend.messages.payloads import ApprovalRequest
from backend.waits import WaitError, answer_approval, answer_question
from backend.waits.digest import approval_of, digest_of

if TYPE_CHECKING:
    from backend.actions.registry import Registry
    from backend.runs.manager import RunManager
    from backend.store.repo import Store

WAIT_KINDS = (MessageKind.APPROVAL, MessageKind.ASK_USER)
REASON_MAX = 4000  # characters of a rejection reason (as the API)

NEEDS_TERMINAL = (
    "planact: {source} asks on the terminal before actions, but stdin is not a terminal: "
    "run it in a terminal, or pass --approval never to let every action run."
)


def needs_terminal(mode: str, source: str = "", stdin: TextIO | None = None) -> str:
    """The sentence refusing a run that must ask but has no terminal, or "". ``source``:
    where the mode came from (default ``--approval MODE``)."""
    stdin = stdin if stdin is not None else sys.stdin
    if mode == "never" or _is_tty(stdin):
        return ""
    return NEEDS_TERMINAL.format(source=source or f"--approval {mode}")


def to_person(text: str, end: str = "\n") -> None:
    """What is asked goes where the person looks: stdout, or stderr when stdout is not a
    terminal (progress sent to a file)."""
    stream = sys.stdout if _is_tty(sys.stdout) else sys.stderr
    print(text, end=end, file=stream, flush=True)


def _is_tty(stream: TextIO | None) -> bool:
    try:
        return stream is not None and stream.isatty()
    except ValueError:  # closed
        return False


class Terminal:
    """Lines typed on a terminal, read without blocking the event loop (the run goes on
    meanwhile). ``None`` from :meth:`line`: end of input (Ctrl-D)."""

    def __init__(self, fd: int, write: Callable[[str], None] | None = None) -> None:
        self.fd = fd
        self._write = write or (lambda text: to_person(text, end=""))
        self._buffer = b""
        self._eof = False

    def discard_typeahead(self) -> None:
        """Forget what was typed before the question was shown: a key pressed while the
        run printed its progress answers nothing."""
        self._buffer = b""
        with contextlib.suppress(OSError, termios.error):
            termios.tcflush(self.fd, termios.TCIFLUSH)

    async def line(self, prompt: str) -> str | None:
        self._write(prompt)
        while b"\n" not in self._buffer and not self._eof:
            await self._readable()
            chunk = os.read(self.fd, 4096)
            if chunk:
                self._buffer += chunk
            else:
                self._eof = True
        if b"\n" in self._buffer:
            raw, self._buffer = self._buffer.split(b"\n", 1)
        elif self._buffer:  # text then Ctrl-D twice: take it as the line
            raw, self._buffer = self._buffer, b""
        else:
            self._write("\n")
            return None
        return raw.decode("utf-8", errors="replace").rstrip("\r")

    async def _readable(self) -> None:
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = loop.create_future()

        def wake() -> None:
            if not ready.done():
                ready.set_result(None)

        loop.add_reader(self.fd, wake)
        try:
            await ready
        finally:
            loop.remove_reader(self.fd)


@dataclass
class Answer:
    """What the person said: an approval decision (``approve`` | ``reject`` |
    ``approve_all``) with its reason, or the answer to a question."""

    decision: str = ""
    reason: str = ""
    answer: str = ""


STOP = None  # the person ended input: the run is to be stopped


def _request(msg: Message) -> ApprovalRequest | None:
    """What an approval message asks, or None: read as the answer reads it (its digest is
    the one the answer names, backend/waits/digest.py)."""
    return approval_of(msg.meta.json_)


def approval_action(msg: Message) -> tuple[str, str]:
    """(action type, class) of an approval message (meta.json's first entry)."""
    request = _request(msg)
    return (request.action_type, request.class_) if request else ("", "")


def _indented(text: str) -> str:
    return "\n".join("    " + line for line in text.split("\n"))


def cut_note(msg: Message) -> str:
    """What the approval left out (meta.json ``shown.note``), or "" when it shows all."""
    request = _request(msg)
    if request is None or request.shown.whole:
        return ""
    return request.shown.note or "Not all of it is shown."


def whole_text(msg: Message) -> str:
    """The action's whole text (its params), for ``s`` at the prompt."""
    request = _request(msg)
    params = request.params if request else {}
    if "content" in params:
        return params["content"]
    return json.dumps(params, indent=2, ensure_ascii=False)


def show_wait(msg: Message, actions: Registry) -> str:
    """What a person reads before answering: the command whole (its whitespace and lines
    made visible), the diff (and what it left out), or the question."""
    body = msg.content.rstrip("\n")
    if msg.meta.action_type == MessageKind.ASK_USER:
        return f"The agent asks:\n{_indented(body)}"
    action, klass = approval_action(msg)
    where = f" ({msg.meta.filepath})" if msg.meta.filepath else ""
    head = f"The agent wants to run {action or 'an action'}{where} [{klass or 'no class'}]"
    request = _request(msg)
    params = request.params if request else {}
    command = params.get("command")
    defn = actions.get(action) if action else None
    if defn is not None and defn.handling.approval_view == "command" and isinstance(command, str):
        cwd = params.get("cwd")
        shown = _indented(show_command(command)) + (f"\n    (in {cwd})" if cwd else "")
        return f"{head}, {size_line(command)}:\n{shown}"
    text = f"{head}:\n{_indented(body)}"
    if note := cut_note(msg):
        text += f"\nNot all shown: {note} Type s to print the whole of it."
    return text


def approval_prompt(klass: str, more: bool = False) -> str:
    every = f'every later action of class "{klass}"' if klass else "every later such action"
    show = "s = show it whole, " if more else ""
    return f"Approve? y = yes, n = no, a = yes and to {every}, {show}or type a reason to refuse: "


async def ask_approval(term: Terminal, msg: Message, say: Callable[[str], None]) -> Answer | None:
    """y / n (then an optional reason) / a / s (print the whole action when the approval
    left some out) / a reason; None: end of input."""
    _, klass = approval_action(msg)
    more = bool(cut_note(msg))
    while True:
        line = await term.line(approval_prompt(klass, more))
        if line is None:
            return STOP
        text = line.strip()
        word = text.lower()
        if more and word in ("s", "show"):
            say(_indented(whole_text(msg).rstrip("\n")))
            continue
        if word in ("y", "yes"):
            return Answer("approve")
        if word in ("a", "all"):
            return Answer("approve_all")
        if word in ("n", "no"):
            reason = await ask_reason(term, say)
            if reason is None:
                return STOP
            return Answer("reject", reason)
        if not text:
            say("Type y, n, a, or a reason to refuse (Ctrl-D stops the run).")
            continue
        if len(text) > REASON_MAX:
            say(f"A reason is at most {REASON_MAX:,} characters; this one has {len(text):,}.")
            continue
        return Answer("reject", text)


async def ask_reason(term: Terminal, say: Callable[[str], None]) -> str | None:
    while True:
        line = await term.line("Why not? (a reason the agent reads; Enter for none): ")
        if line is None:
            return None
        text = line.strip()
        if len(text) <= REASON_MAX:
            return text
        say(f"A reason is at most {REASON_MAX:,} characters; this one has {len(text):,}.")


async def ask_question(term: Terminal, say: Callable[[str], None]) -> Answer | None:
    while True:
        line = await term.line("Your answer: ")
        if line is None:
            return STOP
        if line.strip():
            return Answer(answer=line.strip())
        say("Type an answer (Ctrl-D stops the run).")


class Waits:
    """The waits of one run as its messages arrive (a listener), answered one at a time
    through backend/waits in this process (the manager resumes the run here). A wait that
    closes while its prompt is shown (answered elsewhere, timed out, stopped) drops it;
    either way its final message is shown then (``catch_up``: the messages stored since)."""

    def __init__(
        self,
        term: Terminal,
        manager: RunManager,
        say: Callable[[str], None],
        catch_up: Callable[[str, str], Awaitable[None]],
    ) -> None:
        self.term = term
        self.manager = manager
        self.say = say
        self.catch_up = catch_up
        self._pending: dict[str, Message] = {}
        self._arrived = asyncio.Event()

    def message(self, msg: Message) -> None:
        """Every message of the run (the run's listener)."""
        if msg.meta.action_type not in WAIT_KINDS:
            return
        if msg.status == "running":
            self._pending[msg.uuid] = msg
            self._arrived.set()
        else:  # its final message: answered (here or elsewhere), timed out, stopped
            self._pending.pop(msg.uuid, None)

    async def next(self) -> Message:
        while not self._pending:
            self._arrived.clear()
            await self._arrived.wait()
        return self._pending.pop(next(iter(self._pending)))

    async def answer(self, msg: Message) -> bool:
        """Ask about ``msg`` and answer it; False when the person ended input (stop the
        run). A wait closed meanwhile drops its prompt."""
        self.term.discard_typeahead()
        self.say(show_wait(msg, self.manager.actions))
        if msg.meta.action_type == MessageKind.ASK_USER:
            asking = ask_question(self.term, self.say)
        else:
            asking = ask_approval(self.term, msg, self.say)
        prompt = asyncio.ensure_future(asking)
        closed = asyncio.ensure_future(self.closed(msg))
        dropped = False
        try:
            await asyncio.wait({prompt, closed}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            closed.cancel()
            if not prompt.done():
                prompt.cancel()  # its reader goes with it
                dropped = True
        if dropped:
            await asyncio.wait({prompt})
            self.say("\n(no longer asked: answered elsewhere, timed out or stopped)")
        elif (got := prompt.result()) is STOP:
            return False
        else:
            problem = await self.reply(msg, got)
            if problem:
                self.say(problem)
        await self.catch_up(msg.conversation_id, msg.run_id)
        return True

    async def reply(self, msg: Message, got: Answer) -> str:
        """Answer the wait; "" or why the answer was not taken."""
        try:
            if msg.meta.action_type == MessageKind.ASK_USER:
                await answer_question(self.manager, msg.run_id, msg.uuid, got.answer)
            else:
                # bound to the action shown: refused if the waiting one is another
                await answer_approval(
                    self.manager,
                    msg.run_id,
                    msg.uuid,
                    got.decision,
                    got.reason,
                    digest=digest_of(msg.meta.json_),
                )
        except WaitError as exc:  # answered elsewhere first, timed out, stopped
            return f"Not taken: {exc}"
        return ""

    async def closed(self, msg: Message) -> None:
        """Returns once the run no longer waits on ``msg`` (woken by the run's news)."""
        bus = self.manager.bus
        sub = bus.subscribe(msg.run_id)
        try:
            while True:
                run = await self.manager.store.get_run(msg.run_id)
                wait = run.wait if run else None
                if wait is None or wait.uuid != msg.uuid:
                    return
                await bus.wait(msg.run_id, sub, CLOSED_POLL)
        finally:
            bus.unsubscribe(msg.run_id, sub)


class Follower:
    """The run's stored messages, in order and once each: those the run publishes in this
    process (the listener) and those stored by another hand (a wait's final message, the
    stop of a parked run), read from the store where the seq shows a gap (a conversation's
    seq has none) and at the end."""

    def __init__(self, store: Store, show: Callable[[Message], None]) -> None:
        self.store = store
        self.show = show
        self.waits: Waits | None = None
        self.last = 0
        self._lock = asyncio.Lock()

    async def message(self, msg: Message) -> None:
        """The run's listener."""
        async with self._lock:
            if msg.seq > self.last + 1:
                await self._read(msg.conversation_id, msg.run_id, before=msg.seq)
            if not msg.seq or msg.seq > self.last:
                self._show(msg)

    async def catch_up(self, cid: str, rid: str) -> None:
        """Everything of the run stored and not shown yet."""
        async with self._lock:
            await self._read(cid, rid)

    async def _read(self, cid: str, rid: str, before: int | None = None) -> None:
        while True:
            batch = await self.store.messages(cid, run_id=rid, after=self.last, limit=READ_BATCH)
            for later in batch:
                if before is not None and later.seq >= before:
                    return
                self._show(later)
            if len(batch) < READ_BATCH:
                return

    def _show(self, msg: Message) -> None:
        self.last = max(self.last, msg.seq)
        if self.waits is None:
            self.show(msg)
            return
        if msg.status != "running" or msg.meta.action_type not in WAIT_KINDS:
            self.show(msg)  # (what is asked is shown whole by its prompt)
        self.waits.message(msg)


READ_BATCH = 500  # messages read from the store at once
CLOSED_POLL = 1.0  # seconds between looks at a wait while its prompt is shown (a safety net)


async def follow(manager: RunManager, run_id: str, waits: Waits | None) -> str | None:
    """Wait for the run to end, answering its waits on the terminal as they come. End of
    input at a prompt stops the run (then its final status, as for any stop)."""
    ended = asyncio.ensure_future(manager.wait(run_id))
    if waits is None:
        return await ended
    pending: set[asyncio.Future[Any]] = {ended}
    try:
        while True:
            nxt = asyncio.ensure_future(waits.next())
            pending.add(nxt)
            await asyncio.wait({ended, nxt}, return_when=asyncio.FIRST_COMPLETED)
            if ended.done():
                return ended.result()
            asking = asyncio.ensure_future(waits.answer(nxt.result()))
            pending.add(asking)
            await asyncio.wait({ended, asking}, return_when=asyncio.FIRST_COMPLETED)
            if ended.done():
                return ended.result()
            if not asking.result():  # end of input: stop the run
                to_person("Input ended: stopping the run.")
                await manager.stop(run_id)
                return await manager.wait(run_id, timeout=30)
    finally:
        for fut in pending:
            fut.cancel()
