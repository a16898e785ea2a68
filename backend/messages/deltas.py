"""Live deltas (docs/api.md "The stream", ``event: delta``): coalesced, never stored.

A producer (the model's stream, a running command) calls :meth:`Coalescer.add` as often as
it likes; the coalescer hands the sink at most one batch per message every ``interval``
seconds (the first piece goes out at once, later pieces wait for the next slot), and
:meth:`Coalescer.flush` sends what is pending right away (called before the message's
stored version is published, so deltas always precede it).

When nobody follows the run live (``wanted()`` is false) ``add`` returns at once: readers
that ignore deltas, and runs nobody watches, pay nothing. ``wanted()`` is asked when a batch
starts, not for every piece added to one that waits for its slot.

A delta is one :class:`DeltaEvent`, from the coalescer to the browser (the feed, the
notifier, the SSE stream; the web UI's type is generated from it): ``uuid``,
``action_type``, ``text``, plus ``stream`` for command output and ``offset`` when the
producer gives one: where ``text`` starts in that stream of that message (characters). A
batch that had to drop its middle (more than ``cap`` pending) moves the offset on instead
of marking the cut in the text.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, cast

from pydantic import BaseModel, ConfigDict
from pydantic_core import PydanticSerializationError

INTERVAL = 0.05  # seconds between two batches of one message: about 20 a second
PENDING_CAP = 64 * 1024  # characters kept per message between two batches (the tail)
MAX_SEGMENTS = 16  # stream switches kept in order between two batches


Stream = Literal["stdout", "stderr"]  # a command's output streams


class DeltaEvent(BaseModel):
    """Live text appended to a message being produced; never stored or replayed."""

    model_config = ConfigDict(frozen=True)

    uuid: str
    action_type: str
    text: str
    stream: Stream | None = None
    offset: int | None = None

    def json_bytes(self) -> bytes:
        """Compact UTF-8 JSON, without the fields it does not have (a line break in the
        text is escaped: one line)."""
        try:
            return _SERIALIZER.to_json(self, exclude_none=True)
        except PydanticSerializationError:  # a lone surrogate: escaped
            return json.dumps(self.model_dump(exclude_none=True)).encode()


_SERIALIZER = DeltaEvent.__pydantic_serializer__
DeltaSink = Callable[[DeltaEvent], None]


@dataclass(slots=True)
class _Segment:
    """Text of one output stream (None: a message's content) appended in a row; ``offset``:
    where it starts in that stream (None: not counted)."""

    stream: str | None
    text: str
    offset: int | None


@dataclass
class _Pending:
    action_type: str
    segments: list[_Segment] = field(default_factory=list)  # in order
    size: int = 0
    skipped: int = 0
    last_sent: float = float("-inf")
    timer: asyncio.TimerHandle | None = None


class Coalescer:
    """Coalesces appended text per message (``uuid``) and output stream."""

    def __init__(
        self,
        sink: DeltaSink,
        *,
        interval: float = INTERVAL,
        cap: int = PENDING_CAP,
        wanted: Callable[[], bool] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._sink = sink
        self._interval = interval
        self._cap = cap
        self._wanted = wanted
        self._clock = clock
        self._pending: dict[str, _Pending] = {}
        self.sent = 0  # deltas handed to the sink (for tests and benchmarks)

    def add(
        self,
        uuid: str,
        action_type: str,
        text: str,
        stream: str | None = None,
        offset: int | None = None,
    ) -> None:
        if not text:
            return
        p = self._pending.get(uuid)
        if p is None or p.timer is None:
            # a batch starts here: worth it only if someone follows the run (a batch that
            # waits for its timer was, and takes the text without asking again)
            if self._wanted is not None and not self._wanted():
                return
            if p is None:
                p = self._pending[uuid] = _Pending(action_type)
        if p.segments and p.segments[-1].stream == stream:
            p.segments[-1].text += text
        else:
            p.segments.append(_Segment(stream, text, offset))
            if len(p.segments) > MAX_SEGMENTS:
                _merge_by_stream(p)
        p.size += len(text)
        if p.size > self._cap:
            _keep_tail(p, self._cap)
        if p.timer is not None:
            return
        wait = p.last_sent + self._interval - self._clock()
        if wait <= 0:
            self._send(uuid, p)
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (a thread without one): send now
            self._send(uuid, p)
            return
        p.timer = loop.call_later(wait, self._due, uuid)

    def flush(self, uuid: str | None = None) -> None:
        """Send what is pending now: for one message, or for all."""
        for key in [uuid] if uuid is not None else list(self._pending):
            p = self._pending.get(key)
            if p is not None:
                self._send(key, p)

    def forget(self, uuid: str) -> None:
        """Send what is pending for ``uuid`` and drop its state (its stored version is next)."""
        p = self._pending.pop(uuid, None)
        if p is not None:
            self._send(uuid, p)

    def close(self) -> None:
        for key in list(self._pending):
            self.forget(key)

    def _due(self, uuid: str) -> None:
        p = self._pending.get(uuid)
        if p is not None:
            p.timer = None
            self._send(uuid, p)

    def _send(self, uuid: str, p: _Pending) -> None:
        if p.timer is not None:
            p.timer.cancel()
            p.timer = None
        if not p.segments:
            return
        segments, skipped = p.segments, p.skipped
        p.segments, p.size, p.skipped = [], 0, 0
        p.last_sent = self._clock()
        for i, segment in enumerate(segments):
            stream, text, offset = segment.stream, segment.text, segment.offset
            if i == 0 and skipped and offset is None:
                text = f"[… {skipped} characters skipped …]\n{text}"
            delta = DeltaEvent(
                uuid=uuid,
                action_type=p.action_type,
                text=text,
                stream=cast("Stream | None", stream),  # (validated: stdout or stderr)
                offset=offset,
            )
            self.sent += 1
            self._sink(delta)


def _merge_by_stream(p: _Pending) -> None:
    merged: dict[str | None, _Segment] = {}  # one stream's segments are contiguous
    for segment in p.segments:
        into = merged.setdefault(segment.stream, _Segment(segment.stream, "", segment.offset))
        into.text += segment.text
    p.segments = list(merged.values())


def _keep_tail(p: _Pending, cap: int) -> None:
    extra = p.size - cap
    while extra > 0 and p.segments:
        first = p.segments[0]
        text = first.text
        if len(text) <= extra:
            p.segments.pop(0)
            extra -= len(text)
            p.skipped += len(text)
            p.size -= len(text)
        else:
            first.text = text[extra:]
            if first.offset is not None:
                first.offset += extra
            p.skipped += extra
            p.size -= extra
            extra = 0
