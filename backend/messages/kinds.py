"""Message kinds (``meta.action_type``) and action types, in one place (docs/api.md, docs/tools.md).

A new kind or action is added here; the TypeScript types of the web UI are generated from
this module and :mod:`backend.messages.message` (``make frontend``; a test fails on drift).

Both are ``StrEnum``: a member *is* its wire string (``MessageKind.PLAN == "plan"``), so it
goes wherever a string went before and is stored and sent unchanged.
"""

from __future__ import annotations

from enum import StrEnum


class ActionType(StrEnum):
    """What the model may ask for: the action's name in its reply (docs/tools.md)."""

    WRITE_CODE = "write_code"
    EDIT_FILE = "edit_file"
    READ_FILE = "read_file"
    TERMINAL_RUN = "terminal_run"
    FINISH = "finish"
    WEB_SEARCH = "web_search"
    WEB_FETCH = "web_fetch"
    MCP_TOOL = "mcp_tool"
    ASK_USER = "ask_user"  # the model asks the person (docs/api.md "Runs that wait for a person")
    PREVIEW = "preview"  # starts (or shows) a preview of what the agent built


class MessageKind(StrEnum):
    """``meta.action_type`` of a message in the run's stream, and of a live delta."""

    # the run's structure, in the order of docs/api.md "The stream"
    QUESTION = "question"
    AUTO_REPLY = "auto_reply"
    PLAN = "plan"
    TASK = "task"
    THINKING = "thinking"
    FINISH = "finish"
    FINISH_SUMMERY = "finish_summery"  # sic: the wire value the Vue client checks
    ERROR = "error"
    STOP = "stop"
    # a run that waits for a person (docs/api.md "Runs that wait for a person")
    APPROVAL = "approval"
    ASK_USER = "ask_user"
    # one action: its running message and its final partner (see ACTION_KINDS)
    WRITE_CODE = "write_code"
    EDIT_FILE = "edit_file"
    READ_FILE = "read_file"
    TERMINAL_RUN = "terminal_run"
    SEARCH = "search"
    BROWSER = "browser"
    MCP_TOOL = "mcp_tool"
    PREVIEW = "preview"  # a preview of the agent's app or page (docs/api.md "Previews")
    # live deltas only: the summary's text while the model writes it (stored as FINISH_SUMMERY)
    SUMMARY = "summary"


# The stream kind each action's messages carry. ``finish`` is the task's closing note.
ACTION_KINDS: dict[ActionType, MessageKind] = {
    ActionType.WRITE_CODE: MessageKind.WRITE_CODE,
    ActionType.EDIT_FILE: MessageKind.EDIT_FILE,
    ActionType.READ_FILE: MessageKind.READ_FILE,
    ActionType.TERMINAL_RUN: MessageKind.TERMINAL_RUN,
    ActionType.FINISH: MessageKind.FINISH,
    ActionType.WEB_SEARCH: MessageKind.SEARCH,
    ActionType.WEB_FETCH: MessageKind.BROWSER,
    ActionType.MCP_TOOL: MessageKind.MCP_TOOL,
    ActionType.ASK_USER: MessageKind.ASK_USER,
    ActionType.PREVIEW: MessageKind.PREVIEW,
}

# Actions that write a file of the workspace (their messages name it in meta.filepath).
FILE_ACTIONS: tuple[ActionType, ...] = (ActionType.WRITE_CODE, ActionType.EDIT_FILE)

# Kinds that end a run early: a failed run publishes ERROR, a stopped one STOP.
RUN_END_KINDS: tuple[MessageKind, ...] = (MessageKind.ERROR, MessageKind.STOP)
