"""A capped reader's memory of a byte stream: its head and its tail."""

from __future__ import annotations

from backend.runtime.base import OUTPUT_CAP


class HeadTail:
    """Collect a byte stream keeping only its first and last ``keep`` bytes."""

    def __init__(self, keep: int = OUTPUT_CAP * 4) -> None:
        self.keep = keep
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def feed(self, chunk: bytes) -> None:
        room = self.keep - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if not chunk:
            return
        self.tail += chunk
        if len(self.tail) > self.keep:
            extra = len(self.tail) - self.keep
            self.dropped += extra
            del self.tail[:extra]

    def value(self) -> bytes:
        return bytes(self.head + self.tail)
