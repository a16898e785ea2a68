"""What is in flight in one run: live model text and command output.

Live deltas (docs/api.md "The stream"): model text and command output go through a
:class:`Coalescer` to the run's delta sink; a message's pending deltas are flushed just
before its stored version.
Command output is also kept (capped, head and tail) so that a command cut short by a stop
still leaves its output in the stored message (:meth:`Live.closing_text`; which messages
are still open is tracked by ``RunState.open_actions`` / ``open_tasks``), and so that a
reader who attaches while it runs (a reload, a second tab, a reconnect, on any process) gets
the output so far first (:meth:`Live.catch_up`). Command output deltas carry ``offset``:
where their text starts in the command's stream, so a reader drops what it already has.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
from collections import deque
from collections.abc import Awaitable, Callable
from typing import cast

from backend.actions.values import scrub
from backend.agent.narration import ACTION_LINE_STARTS, ProseCut
from backend.messages.deltas import Coalescer, DeltaEvent, Stream
from backend.messages.message import Message

OUTPUT_KEEP = 16_000  # characters of live output kept per stream for a stopped command

DeltaSink = Callable[[DeltaEvent], None]
DeltaPublisher = Callable[[DeltaEvent], Awaitable[None]]


class _Kept:
    """The head and the tail of one output stream (characters)."""

    def __init__(self, keep: int = OUTPUT_KEEP) -> None:
        self.keep = keep
        self.head = ""
        self.tail = ""
        self.dropped = 0
        self.total = 0  # characters fed so far

    def feed(self, text: str) -> None:
        self.total += len(text)
        room = self.keep - len(self.head)
        if room > 0:
            self.head += text[:room]
            text = text[room:]
        if not text:
            return
        self.tail += text
        if len(self.tail) > self.keep:
            extra = len(self.tail) - self.keep
            self.dropped += extra
            self.tail = self.tail[extra:]

    def value(self) -> str:
        if not self.dropped:
            return self.head + self.tail
        return f"{self.head}\n[... {self.dropped} characters cut from the middle ...]\n{self.tail}"


def _ignore(kind: str, piece: str) -> None:
    """The delta callback of a Live that streams nothing."""


class Live:
    """``sink`` gets each coalesced delta synchronously (tests, the CLI); ``publish`` (the
    run's notifier) gets them in order through an outbox, drained by a background task and
    by :meth:`drain`, which the run awaits before it publishes a stored message.
    ``publish_now`` (optional) delivers a delta at once when it can (True; nothing has to
    cross processes): used while nothing is queued or being sent, so the order stays the
    same, and no task is started per delta."""

    def __init__(
        self,
        sink: DeltaSink | None = None,
        wanted: Callable[[], bool] | None = None,
        publish: DeltaPublisher | None = None,
        publish_now: Callable[[DeltaEvent], bool] | None = None,
    ) -> None:
        self._sink = sink
        self._publish = publish
        self._publish_now = publish_now
        self._outbox: deque[DeltaEvent] = deque()
        self._drainer: asyncio.Task[None] | None = None
        self._sending = 0  # deltas taken from the outbox and still being published
        on = sink is not None or publish is not None
        self.deltas = Coalescer(self._emit, wanted=wanted) if on else None
        self._output: dict[str, dict[str, _Kept]] = {}
        self._kinds: dict[str, str] = {}  # a running action's stream kind, by its uuid
        self._decoders: dict[tuple[str, str], codecs.IncrementalDecoder] = {}

    def _emit(self, delta: DeltaEvent) -> None:
        # model text may hold lone surrogates or NUL (JSON escapes): never on the wire
        text = scrub(delta.text)
        if text != delta.text:
            delta = delta.model_copy(update={"text": text})
        if self._sink is not None:
            self._sink(delta)
        if self._publish is None:
            return
        idle = not self._outbox and not self._sending
        if idle and self._publish_now is not None and self._publish_now(delta):
            return  # nothing queued or on its way before it: the order is kept
        self._outbox.append(delta)
        if self._drainer is None or self._drainer.done():
            with contextlib.suppress(RuntimeError):  # no loop: the next drain() sends it
                self._drainer = asyncio.get_running_loop().create_task(self.drain())

    async def drain(self) -> None:
        """Hand every pending delta to the publisher, in order."""
        while self._outbox and self._publish is not None:
            self._sending += 1  # taken from the outbox, not delivered yet
            try:
                await self._publish(self._outbox.popleft())
            finally:
                self._sending -= 1

    # -- the stored side --------------------------------------------------------------------
    def flush(self, uuid: str) -> None:
        """The message ``uuid`` is about to be stored: its pending deltas go now."""
        if self.deltas is not None:
            self.deltas.forget(uuid)

    def published(self, msg: Message) -> None:
        """``msg`` was stored and is about to be sent: its pending deltas go first; a final
        message ends what was kept for it."""
        if self.deltas is not None:
            self.deltas.forget(msg.uuid)
        if msg.status != "running":
            self._output.pop(msg.uuid, None)
            self._kinds.pop(msg.uuid, None)
            for stream in ("stdout", "stderr"):
                self._decoders.pop((msg.uuid, stream), None)

    def closing_text(self, uuid: str, reason: str) -> str:
        """The content of the `failure` partner of a message cut short (a stop, an error, a
        shutdown): ``reason``, then for a command the output it printed until then."""
        kept = self._output.get(uuid)
        if not kept:
            return reason
        parts = [reason, "Output before that:"]
        for stream in ("stdout", "stderr"):
            text = kept[stream].value() if stream in kept else ""
            parts.append(f"{stream}:\n{text}" if text else f"{stream}: (empty)")
        return "\n".join(parts)

    # -- live deltas ------------------------------------------------------------------------
    def text(self, uuid: str, action_type: str, piece: str) -> None:
        """Model text of the message ``uuid`` as it is written."""
        if self.deltas is not None:
            self.deltas.add(uuid, action_type, piece)

    def model_text(self, uuid: str, action_type: str) -> Callable[[str, str], None]:
        """An ``on_delta(kind, text)`` callback streaming the reply's text as ``uuid``."""

        deltas = self.deltas
        if deltas is None:
            return _ignore
        add = deltas.add  # called for every piece of the reply: one call, not two

        def on_delta(kind: str, piece: str) -> None:
            if kind == "text":
                add(uuid, action_type, piece)

        return on_delta

    def prose(
        self, uuid: str, action_type: str, line_starts: tuple[str, ...] = ACTION_LINE_STARTS
    ) -> Callable[[str, str], None]:
        """An ``on_delta(kind, text)`` callback that streams only the reply's leading prose
        (never an action or a plan) as model text of ``uuid``."""
        cut = ProseCut(line_starts)

        def on_delta(kind: str, piece: str) -> None:
            if kind == "text":
                released = cut.feed(piece)
                if released:
                    self.text(uuid, action_type, released)

        return on_delta

    def command_output(self, uuid: str, kind: str) -> Callable[[str, bytes], None]:
        """An ``on_output(stream, data)`` callback for the runtime: the command ``uuid``'s
        bytes as they are printed (UTF-8 decoded across chunk boundaries). ``kind``: the
        action's stream kind (an MCP tool's progress streams as ``mcp_tool`` output)."""
        self._kinds[uuid] = kind

        def on_output(stream: str, data: bytes) -> None:
            key = (uuid, stream)
            decoder = self._decoders.get(key)
            if decoder is None:
                decoder = self._decoders[key] = codecs.getincrementaldecoder("utf-8")("replace")
            text = decoder.decode(data)
            if text:
                self.output(uuid, stream, text)

        return on_output

    def output(self, uuid: str, stream: str, text: str) -> None:
        """Output of the running command ``uuid`` (its callback made by
        :meth:`command_output`): kept (capped) and streamed. Output after its final message
        was published has no message left to go with: it is dropped."""
        kind = self._kinds.get(uuid)
        if kind is None:
            return
        kept = self._output.setdefault(uuid, {}).setdefault(stream, _Kept())
        offset = kept.total
        kept.feed(text)
        if self.deltas is not None:
            self.deltas.add(uuid, kind, text, stream, offset)

    # -- catch-up for a reader who attaches mid-command -------------------------------------
    def catch_up(self) -> list[DeltaEvent]:
        """The output of every running command so far, as deltas with offsets: the kept
        head at offset 0 and, when the middle was cut, the kept tail at its own offset."""
        out: list[DeltaEvent] = []
        for uuid, streams in list(self._output.items()):
            for stream, kept in streams.items():
                pieces = [(0, kept.head)]
                if kept.tail:
                    pieces.append((len(kept.head) + kept.dropped, kept.tail))
                for offset, text in pieces:
                    if text:
                        delta = DeltaEvent(
                            uuid=uuid,
                            action_type=self._kinds[uuid],
                            stream=cast("Stream", stream),
                            text=scrub(text),
                            offset=offset,
                        )
                        out.append(delta)
        return out

    def send_catch_up(self) -> None:
        """A reader on another process attached: the output so far to every reader, in order
        with the live deltas (readers that have it drop it by its offsets)."""
        if self._publish is None:
            return
        if self.deltas is not None:  # pending text first: offsets stay in order on the wire
            self.deltas.flush()
        deltas = self.catch_up()
        if not deltas:
            return
        self._outbox.extend(deltas)
        if self._drainer is None or self._drainer.done():
            with contextlib.suppress(RuntimeError):
                self._drainer = asyncio.get_running_loop().create_task(self.drain())

    def close(self) -> None:
        if self.deltas is not None:
            self.deltas.close()
