"""The LemonAI web client's logic, reimplemented in Python from its protocol.

What hexdocom/lemonai's Vue client does with planact's answers (read from its public
`frontend/src`: services/sse.js, services/see-agent.js, services/message.js,
store/modules/chat.js, view/lemon/message/{Message,Planing,Observation}.vue,
components/MessageFileList), written anew here so that tests can assert what a LemonAI
user would see. Where the real client would throw (and Vue blank the conversation), this
harness raises :class:`ClientCrash`.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, cast

MODE_MARKER = "__lemon_mode__"
OUT_END = "__lemon_out_end__"
INITIAL_PLAN = "Planning in progress"  # the client's botInitialPlan text (i18n)
ACTION_NAMES = {
    "terminal_run": "Run command",
    "read_code": "Read file",
    "write_code": "Edit file",
    "read_file": "Read file",
    "web_search": "Searching",
    "browser": "Browsing",
}


class ClientCrash(AssertionError):
    """Where the real client throws a TypeError (and the conversation goes blank)."""


# -- transport ----------------------------------------------------------------------------
def sse_data(lines: Iterable[str]) -> Iterator[str]:
    """Every `data:` payload of an SSE body, as it arrives (fetch-event-source's parsing)."""
    data: list[str] = []
    for raw in lines:
        line = raw.rstrip("\r\n")
        if line == "":
            if data:
                yield "\n".join(data)
            data = []
        elif line.startswith(":"):
            continue
        else:
            name, _, value = line.partition(":")
            if name == "data":
                data.append(value[1:] if value.startswith(" ") else value)
    if data:
        yield "\n".join(data)


def decode(data: str) -> str:
    """atob, then percent-decoding of each byte: base64 of UTF-8, or a throw."""
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ClientCrash(f"atob throws on {data[:40]!r}: the stream aborts") from exc
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ClientCrash("decodeURIComponent throws: not UTF-8") from exc


# -- the store and the reducer ------------------------------------------------------------
@dataclass
class Chat:
    """useChatStore: the conversation list, the current messages, the twins column."""

    conversations: list[dict[str, Any]] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)
    twins: list[dict[str, Any]] = field(default_factory=list)

    def status(self, cid: str) -> str | None:
        for c in self.conversations:
            if c["conversation_id"] == cid:
                return str(c["status"])
        return None

    def set_status(self, cid: str, status: str) -> None:
        for c in self.conversations:
            if c["conversation_id"] == cid:
                c["status"] = status

    # handleInitMessage: the user's text and a waiting bot bubble before the stream opens
    def init_message(self, question: str, column: list[dict[str, Any]]) -> None:
        column.append(
            {
                "content": question,
                "role": "user",
                "is_temp": True,
                "meta": {"action_type": "question", "json": []},
            }
        )
        column.append({"content": "", "role": "assistant", "is_temp": True})


def handle_message(message: dict[str, Any], messages: list[dict[str, Any]]) -> None:
    """services/message.js handleMessage, the one reducer for live and replayed messages."""
    meta = message.get("meta")
    if isinstance(meta, str):
        meta = message["meta"] = json.loads(meta)
    if meta is None:
        raise ClientCrash("message.meta.action_type of undefined")
    kind = meta.get("action_type")
    if kind == "":
        return
    if not kind:
        messages.append(message)
        return
    if kind == "chat":
        messages.append(message)
    elif kind == "auto_reply":
        messages.append(message)
        messages.append(
            {
                "content": INITIAL_PLAN,
                "role": "assistant",
                "is_temp": True,
                "meta": {"action_type": "update_status"},
            }
        )
    elif kind == "plan":
        _drop_update_status(messages)
        tasks = meta.get("json")
        if not isinstance(tasks, list) or not tasks:
            raise ClientCrash("plan meta.json[0] of undefined")
        for t in tasks:
            t["is_collapse"] = True
        tasks[0]["status"] = "running"
        messages.append(message)
    elif kind == "question":
        for i in range(len(messages) - 1, -1, -1):
            if messages[i].get("role") == "user" and messages[i].get("is_temp"):
                messages[i] = message
                message["files"] = meta.get("json")
                return
        messages.append(message)
    elif kind in ("finish_summery", "progress", "coding"):
        files = meta.get("json")
        if not isinstance(files, list):
            raise ClientCrash("finish_summery meta.json.length of undefined")
        messages.append(message)
    elif kind in ("stop", "error"):
        messages.append(message)
        _drop_update_status(messages)
        for m in messages:
            if (m.get("meta") or {}).get("action_type") == "plan" and isinstance(
                m["meta"].get("json"), list
            ):
                for t in m["meta"]["json"]:
                    if t.get("status") == "running":
                        t["status"] = "success"
                    for a in t.get("actions") or []:
                        if a.get("status") == "running":
                            a["status"] = "success"
    elif kind == "finish":
        return
    elif kind == "task":
        _update_task(message, messages)
    else:
        _update_action(message, messages)


def _drop_update_status(messages: list[dict[str, Any]]) -> None:
    messages[:] = [
        m for m in messages if (m.get("meta") or {}).get("action_type") != "update_status"
    ]


def _plan(messages: list[dict[str, Any]]) -> dict[str, Any]:
    for m in reversed(messages):
        if (m.get("meta") or {}).get("action_type") == "plan":
            return cast(dict[str, Any], m)
    raise ClientCrash("plan of undefined: an action or task arrived before any plan")


def _update_task(message: dict[str, Any], messages: list[dict[str, Any]]) -> None:
    plan = _plan(messages)
    tasks = plan["meta"]["json"]
    meta = message["meta"]
    index = next((i for i, t in enumerate(tasks) if t.get("id") == meta.get("task_id")), -1)
    if index == -1:
        return
    js = meta.get("json")
    status = (js.get("status") if isinstance(js, dict) else None) or message.get("status")
    tasks[index]["status"] = status
    tasks[index]["meta"] = meta
    if status == "failure":
        tasks[index]["actions"] = [
            a for a in tasks[index].get("actions") or [] if a.get("status") != "running"
        ]
    if status in ("success", "completed") and index + 1 < len(tasks):
        tasks[index + 1]["status"] = "running"


def _update_action(message: dict[str, Any], messages: list[dict[str, Any]]) -> None:
    meta = message["meta"]
    if meta.get("action_type") == "terminal_run":
        message["content"] = [message.get("content")]
    tasks = _plan(messages)["meta"]["json"]
    index = next((i for i, t in enumerate(tasks) if t.get("id") == meta.get("task_id")), -1)
    if index == -1:
        index = next((i for i, t in enumerate(tasks) if t.get("status") == "running"), -1)
        if index == -1:
            index = max(0, len(tasks) - 1)
    actions = tasks[index].setdefault("actions", [])
    for action in actions:
        if action.get("uuid") == message.get("uuid"):
            action["status"] = message.get("status")
            action["meta"] = meta
            if meta.get("action_type") == "terminal_run":
                action["content"] = [action["content"][0], message["content"][0]]
            return
    actions.append(message)


# -- the stream (see-agent.js sendMessage / sendChatMessage) --------------------------------
@dataclass
class StreamResult:
    mode: str | None
    tokens: list[str]


def consume(
    chat: Chat,
    cid: str,
    lines: Iterable[str],
    column: list[dict[str, Any]] | None = None,
    on_token: Callable[[str], None] | None = None,
) -> StreamResult:
    """Feed one run's SSE body through onTokenStream into the store."""
    target = chat.messages if column is None else column
    mode: str | None = None
    tokens: list[str] = []
    for data in sse_data(lines):
        ch = decode(data)
        tokens.append(ch)
        if on_token is not None:
            on_token(ch)
        if chat.status(cid) == "done":
            continue  # the client drops events of a conversation it thinks is done
        if ch.startswith(MODE_MARKER):
            mode = json.loads(ch[len(MODE_MARKER) :])["mode"]
            temp = next(
                (m for m in reversed(target) if m.get("role") == "assistant" and m.get("is_temp")),
                None,
            )
            if temp is None:
                temp = {"role": "assistant", "is_temp": True, "content": ""}
                target.append(temp)
            if mode == "chat":
                temp["meta"] = {"action_type": "chat"}
                temp["content"] = ""
            else:
                temp["content"] = "Thinking"
            continue
        if mode == "chat":
            last = target[-1]
            if OUT_END in ch:
                last["is_temp"] = False
            else:
                last["content"] = (last.get("content") or "") + ch
        elif mode == "agent" and ch.startswith("{") and ch.endswith("}"):
            message = json.loads(ch)
            for i, m in enumerate(target):
                if m.get("is_temp") and m.get("role") == "assistant":
                    del target[i]
                    break
            handle_message(message, target)
    chat.set_status(cid, "done")  # the stream's finally
    return StreamResult(mode, tokens)


def replay(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """initConversation: the stored list through the same reducer."""
    out: list[dict[str, Any]] = []
    for m in messages:
        handle_message(m, out)
    return out


# -- what the page shows ------------------------------------------------------------------
def render(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What Message.vue / Planing.vue / Observation.vue / MessageFileList draw."""
    view: list[dict[str, Any]] = []
    for m in messages:
        meta = m.get("meta") or {}
        kind = meta.get("action_type")
        if m.get("role") == "assistant" and m.get("is_temp") and not meta:
            view.append({"kind": "waiting", "text": m.get("content", "")})
        elif kind == "plan":
            view.append(
                {"kind": "plan", "text": m.get("content", ""), "tasks": _render_plan(meta["json"])}
            )
        elif kind == "update_status":
            view.append({"kind": "spinner", "text": m.get("content", "")})
        elif kind == "stop":
            view.append({"kind": "stop"})
        elif kind == "error":
            view.append({"kind": "error"})
        elif kind == "chat":
            view.append(
                {"kind": "chat", "text": m.get("content", ""), "open": bool(m.get("is_temp"))}
            )
        elif m.get("role") == "user":
            view.append({"kind": "user", "text": m.get("content", "")})
        else:
            item: dict[str, Any] = {"kind": kind or "text", "text": m.get("content", "")}
            if kind in ("finish_summery", "question", "progress"):
                item["files"] = [
                    str(f.get("filepath", "")).split("/")[-1] for f in meta.get("json") or []
                ]
            view.append(item)
    return view


def _render_plan(tasks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for t in tasks:
        status = t.get("status")
        if not status or status == "pending":
            out.append({"description": t.get("description"), "shown": False})
            continue
        row: dict[str, Any] = {
            "description": t.get("description"),
            "shown": True,
            "tick": "success"
            if status in ("success", "completed")
            else "failure"
            if status == "failure"
            else "spinner",
            "actions": [_chip(a) for a in t.get("actions") or [] if a.get("content") != ""],
        }
        if status == "failure":
            comments = (t.get("meta") or {}).get("json") or {}
            if not isinstance(comments, dict) or not isinstance(comments.get("comments"), str):
                raise ClientCrash("Planing.vue: item.meta.json.comments.indexOf of undefined")
            row["alert"] = comments["comments"]
        out.append(row)
    return out


def _chip(action: dict[str, Any]) -> dict[str, Any]:
    kind = action["meta"]["action_type"]
    content = action.get("content")
    info = content[0] if kind == "terminal_run" and isinstance(content, list) else content
    return {"text": f"{ACTION_NAMES.get(kind, '')} {info}".strip(), "status": action.get("status")}
