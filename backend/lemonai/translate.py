"""planact's messages and conversations in the shapes the LemonAI client renders.

Pure functions and one small stateful :class:`Translator`; no I/O. The same translator
serves the live stream and the replayed list, so both render alike.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from backend.actions.registry import Registry
from backend.messages.kinds import RUN_END_KINDS, MessageKind
from backend.messages.message import Message
from backend.store.shapes import ConversationDetail, ConversationSummary

# the client's work modes -> planact's run modes
MODES = {"twins": "auto", "task": "agent", "auto": "auto", "chat": "chat", "agent": "agent"}

MODE_MARKER = "__lemon_mode__"
OUT_END = "__lemon_out_end__"

# planact task status -> what Planing.vue ticks
TASK_STATUS = {"pending": "pending", "running": "running", "completed": "completed"}
DROPPED = {MessageKind.THINKING}  # LemonAI has no place for model reasoning

# kinds rendered as they are, not as an action chip
NOT_ACTIONS = (MessageKind.QUESTION, MessageKind.AUTO_REPLY, MessageKind.FINISH, *RUN_END_KINDS)

PathMapper = Callable[[str], str]


def lemon_mode(mode: object) -> str | None:
    """planact's mode for the client's ``mode`` (None for an unknown one)."""
    if mode is None or mode == "":
        return "auto"
    return MODES.get(mode) if isinstance(mode, str) else None


def lemon_status(status: str) -> str:
    """LemonAI knows a conversation as `running` or `done`. A conversation with no run yet
    is `running`, as LemonAI's own server makes it: the client creates the conversation,
    then starts its run, and drops every stream event of a conversation a list fetched in
    between calls `done`. A run waiting for a person (started elsewhere) is still running."""
    return "running" if status in ("running", "idle", "waiting") else "done"


def conversation(conv: ConversationSummary, agent_id: int) -> dict[str, Any]:
    """A planact conversation as a LemonAI conversation row (a listed one has no tokens)."""
    created = conv.created_at
    updated = conv.updated_at or created
    spent = conv if isinstance(conv, ConversationDetail) else None
    return {
        "conversation_id": conv.conversation_id,
        "title": conv.title,
        "content": conv.title,
        "status": lemon_status(conv.status),
        "planact_status": conv.status,
        "mode_type": "task",
        "agent_id": agent_id,
        "model_id": None,
        "model_name": None,
        "twins_id": None,
        "is_favorite": False,
        "is_public": False,
        "create_at": created,
        "update_at": updated,
        "input_tokens": spent.prompt_tokens if spent else 0,
        "output_tokens": spent.completion_tokens if spent else 0,
    }


def chat_end_token(answer_seq: int, question_seq: int) -> str:
    return OUT_END + json.dumps({"message_id": str(answer_seq), "pid": str(question_seq)})


class Translator:
    """Feed planact messages in ``seq`` order; get LemonAI messages back.

    - ``plan`` content is ``''`` (the client lists the tasks itself), task statuses are
      the ones Planing.vue draws (``failed`` -> ``failure``), a task shows its title;
    - ``task`` ``meta.json`` is one object with ``comments``; a failed task is held until
      the run's ``error``/``stop`` says why, and carries that reason in ``comments``;
    - a running action's content is its path (the chip reads "Edit file hello.py");
    - file paths are absolute server paths (``POST /api/file/read`` maps them back);
    - ``thinking`` is dropped; ``edit_file`` shows as ``write_code``;
    - ``chat_runs``: runs answered without a plan, whose ``auto_reply`` is a ``chat``
      message (the client's chat bubble, not "planning in progress").
    """

    def __init__(
        self, to_abs: PathMapper, actions: Registry, chat_runs: frozenset[str] = frozenset()
    ) -> None:
        self.to_abs = to_abs
        self.actions = actions  # the process's: each action's LemonAI type
        self.chat_runs = chat_runs
        self._running: set[str] = set()
        self._held: dict[str, Any] | None = None

    def feed(self, msg: Message) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        kind = msg.meta.action_type
        if self._held is not None:
            held, self._held = self._held, None
            if kind in RUN_END_KINDS and msg.content:
                held["meta"]["json"]["comments"] = msg.content
            out.append(held)
        if kind in DROPPED:
            return out
        item = self._translate(msg)
        if kind == MessageKind.TASK and msg.status == "failure":
            self._held = item
        else:
            out.append(item)
        return out

    def flush(self) -> list[dict[str, Any]]:
        held, self._held = self._held, None
        return [held] if held is not None else []

    # -- one message ----------------------------------------------------------------------
    def _translate(self, msg: Message) -> dict[str, Any]:
        data = msg.to_dict()
        data["id"] = msg.seq
        meta = data["meta"]
        kind = meta["action_type"]
        if meta.get("filepath"):
            meta["filepath"] = self.to_abs(meta["filepath"])
        if kind == MessageKind.PLAN:
            data["content"] = ""
            meta["json"] = [_plan_task(t) for t in meta.get("json") or []]
        elif kind == MessageKind.TASK:
            task = dict((meta.get("json") or [{}])[0])
            planact_status = task.get("status", "")
            task.update(_plan_task(task))
            task["status"] = {"completed": "success", "failed": "failure"}.get(
                planact_status, planact_status
            )
            task["comments"] = "The task failed." if msg.status == "failure" else ""
            meta["json"] = task
        elif kind == MessageKind.AUTO_REPLY and msg.run_id in self.chat_runs:
            meta["action_type"] = "chat"
        elif kind == MessageKind.FINISH_SUMMERY:
            # files only (a preview's URL is in the summary's text)
            meta["json"] = [self._file(f) for f in meta.get("json") or [] if "preview" not in f]
        elif kind not in NOT_ACTIONS:
            self._action(msg, data)
        return data

    def _action(self, msg: Message, data: dict[str, Any]) -> None:
        meta = data["meta"]
        kind = meta["action_type"]
        # the action's LemonAI type (its registry definition says: search, browser, mcp_tool…)
        meta["action_type"] = self.actions.lemonai_type(kind)
        if msg.status == "running":
            self._running.add(msg.uuid)
            if msg.meta.filepath:
                data["content"] = msg.meta.filepath
        else:
            self._running.discard(msg.uuid)

    def _file(self, entry: dict[str, Any]) -> dict[str, Any]:
        out = dict(entry)
        rel = str(entry.get("filepath", ""))
        out["filename"] = entry.get("filename") or rel.rsplit("/", 1)[-1]
        out["filepath"] = self.to_abs(rel) if rel else ""
        out["relative_path"] = rel
        return out


def _plan_task(task: dict[str, Any]) -> dict[str, Any]:
    out = dict(task)
    status = str(task.get("status", "pending"))
    out["status"] = TASK_STATUS.get(status, "failure" if status == "failed" else status)
    title = str(task.get("title") or "")
    if title:
        out["detail"] = task.get("description", "")
        out["description"] = title
    return out


def chat_run_ids(messages: list[Message]) -> frozenset[str]:
    """Runs that answered without planning: an ``auto_reply`` and no ``plan``."""
    replied: set[str] = set()
    planned: set[str] = set()
    for m in messages:
        if m.meta.action_type == MessageKind.AUTO_REPLY:
            replied.add(m.run_id)
        elif m.meta.action_type in (MessageKind.PLAN, MessageKind.TASK):
            planned.add(m.run_id)
    return frozenset(replied - planned)


def translate_all(
    messages: list[Message], to_abs: PathMapper, actions: Registry
) -> list[dict[str, Any]]:
    """A whole conversation for ``/api/message/list``."""
    tr = Translator(to_abs, actions, chat_run_ids(messages))
    out: list[dict[str, Any]] = []
    for m in messages:
        out.extend(tr.feed(m))
    out.extend(tr.flush())
    return out
