"""One reader's view of running commands' output: no character twice, none out of place.

Command output deltas carry ``offset`` (where their text starts in that stream of that
command). A reader who attaches mid-command first gets the output so far (a catch-up from
the process that runs the command: the kept head at offset 0, and the kept tail at its own
offset when the middle was cut), then the live deltas; catch-up and live deltas overlap, and
deltas sent before the catch-up reached this reader may arrive first. :class:`OutputCursor`
keeps, per command and stream, where this reader's output ends:

- a delta of a stream this reader has not seen from its start (offset > 0) is dropped: the
  catch-up, which covers it, follows;
- text this reader already has is cut off; what is new passes;
- a delta that starts past the end (a middle cut, a lost notification) passes with its
  offset (the client shows the gap).

Deltas without an offset (model text) pass as they are.
"""

from __future__ import annotations

from backend.messages.deltas import DeltaEvent


class OutputCursor:
    def __init__(self) -> None:
        self._ends: dict[tuple[str, str], int] = {}

    def admit(self, delta: DeltaEvent) -> DeltaEvent | None:
        """``delta`` as this reader should get it, or None when it has all of it."""
        offset = delta.offset
        if offset is None:
            return delta
        key = (delta.uuid, str(delta.stream))
        text = delta.text
        end = self._ends.get(key)
        if end is None:
            if offset > 0:
                return None
            end = 0
        if offset + len(text) <= end:
            return None
        self._ends[key] = offset + len(text)
        if offset >= end:
            return delta
        return delta.model_copy(update={"text": text[end - offset :], "offset": end})

    def done(self, uuid: str) -> None:
        """The command's final message passed: its output is in it."""
        if self._ends:
            for key in [k for k in self._ends if k[0] == uuid]:
                del self._ends[key]
