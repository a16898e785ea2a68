"""A small SSE reader for tests (works on any iterator of text lines)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any


@dataclass
class Event:
    event: str
    data: str
    id: str | None

    @property
    def json(self) -> Any:
        return json.loads(self.data)


def iter_events(lines: Iterable[str]) -> Iterator[Event]:
    data: list[str]
    event, data, eid = "message", [], None
    for raw in lines:
        line = raw.rstrip("\r\n")
        if line == "":
            if data:
                yield Event(event, "\n".join(data), eid)
            event, data, eid = "message", [], None
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "event":
            event = value
        elif field == "data":
            data.append(value)
        elif field == "id":
            eid = value
    if data:
        yield Event(event, "\n".join(data), eid)


def collect(lines: Iterable[str]) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """(messages, end payload) of one stream."""
    messages: list[dict[str, Any]] = []
    end = None
    for ev in iter_events(lines):
        if ev.event == "message":
            messages.append(ev.json)
            assert ev.id == str(ev.json["seq"])
        elif ev.event == "end":
            end = ev.json
            break
    return messages, end
