"""One run's stream as the LemonAI client reads it: a mode marker first, then either the
agent's messages as JSON chunks or a chat answer as text tokens, no `end` event."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from typing import Any

from sse_starlette import ServerSentEvent

from backend.actions.registry import Registry
from backend.lemonai.translate import MODE_MARKER, PathMapper, Translator, chat_end_token
from backend.messages.deltas import DeltaEvent
from backend.messages.kinds import MessageKind
from backend.messages.message import Message
from backend.runs.feed import End, FeedEvent

HELD_IN_AUTO = (MessageKind.QUESTION, MessageKind.AUTO_REPLY)


def encode(token: str) -> ServerSentEvent:
    """The client decodes every `data:` with atob + percent-decoding: base64 of UTF-8."""
    return ServerSentEvent(data=base64.b64encode(token.encode()).decode("ascii"), event="message")


def mode_token(mode: str) -> str:
    return MODE_MARKER + json.dumps({"mode": mode})


def message_token(item: dict[str, Any]) -> str:
    return json.dumps(item, ensure_ascii=False, separators=(",", ":"))


async def lemon_events(
    feed: AsyncIterator[FeedEvent], stream: LemonStream
) -> AsyncIterator[ServerSentEvent]:
    """The run feed encoded for the LemonAI client."""
    async for event in feed:
        for token in stream.event(event):
            yield encode(token)
        if isinstance(event, End):
            return


class LemonStream:
    """Feed planact's stream events; get the client's tokens (decoded strings) back.

    ``mode`` is planact's run mode. ``chat`` and ``agent`` are known up front; ``auto``
    holds the question and the first answer until the run shows what it is: a plan (or
    anything else) makes it an agent run, an end right after the answer a chat answer.
    """

    def __init__(self, mode: str, to_abs: PathMapper, actions: Registry) -> None:
        self.decided: str | None = mode if mode in ("chat", "agent") else None
        self.started = False
        self.held: list[Message] = []
        self.translator = Translator(to_abs, actions)
        self.question_seq = 0
        self.answer_seq = 0
        self.sent_text = ""

    def event(self, event: FeedEvent) -> list[str]:
        if isinstance(event, DeltaEvent):
            return self.delta(event)
        if isinstance(event, End):
            return self.end()
        return self.message(event)

    def message(self, msg: Message) -> list[str]:
        if self.decided is None:
            if msg.meta.action_type in HELD_IN_AUTO:
                self.held.append(msg)
                return []
            self.decided = "agent"
            held, self.held = self.held, []
            return self._open() + [t for m in [*held, msg] for t in self._agent(m)]
        return self._open() + (self._chat(msg) if self.decided == "chat" else self._agent(msg))

    def delta(self, delta: DeltaEvent) -> list[str]:
        """Live model text: a chat answer streams as it is written."""
        if self.decided != "chat" or delta.action_type != MessageKind.AUTO_REPLY:
            return []
        text = delta.text
        self.sent_text += text
        return self._open() + ([text] if text else [])

    def end(self) -> list[str]:
        if self.decided is None:
            held, self.held = self.held, []
            if any(m.meta.action_type == MessageKind.AUTO_REPLY for m in held):
                self.decided = "chat"
                out = self._open() + [t for m in held for t in self._chat(m)]
            else:
                self.decided = "agent"
                out = self._open() + [t for m in held for t in self._agent(m)]
        else:
            out = self._open()
        if self.decided == "chat":
            return [*out, chat_end_token(self.answer_seq, self.question_seq)]
        return out + [message_token(item) for item in self.translator.flush()]

    # -- internals ------------------------------------------------------------------------
    def _open(self) -> list[str]:
        if self.started or self.decided is None:
            return []
        self.started = True
        return [mode_token(self.decided)]

    def _agent(self, msg: Message) -> list[str]:
        return [message_token(item) for item in self.translator.feed(msg)]

    def _chat(self, msg: Message) -> list[str]:
        kind = msg.meta.action_type
        if kind == MessageKind.QUESTION:
            self.question_seq = msg.seq
        elif kind == MessageKind.AUTO_REPLY:
            self.answer_seq = msg.seq
            sent = self.sent_text.lstrip()
            rest = msg.content[len(sent) :] if msg.content.startswith(sent) else ""
            self.sent_text = msg.content
            return [rest] if rest else []
        elif kind == MessageKind.ERROR:
            return [f"\n\n{msg.content}"]
        return []
