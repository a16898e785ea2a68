"""The one definition of message kinds and action types (docs/api.md, docs/tools.md)."""

from __future__ import annotations

import json

from backend.actions.model import ACTION_ALIASES, ACTIONS
from backend.messages.kinds import ACTION_KINDS, FILE_ACTIONS, ActionType, MessageKind
from backend.messages.message import Message, Meta


def test_every_kind_of_the_contract_is_defined_with_its_wire_spelling() -> None:
    wire = {
        "question", "auto_reply", "plan", "task", "thinking", "finish", "finish_summery",
        "error", "stop", "approval", "ask_user", "write_code", "edit_file", "read_file",
        "terminal_run", "search", "browser", "mcp_tool", "summary", "preview",
    }  # fmt: skip
    assert {k.value for k in MessageKind} == wire
    assert MessageKind.FINISH_SUMMERY.value == "finish_summery"


def test_every_action_has_the_stream_kind_the_contract_names() -> None:
    assert set(ACTION_KINDS) == set(ActionType)
    assert ACTION_KINDS[ActionType.WEB_SEARCH] == MessageKind.SEARCH
    assert ACTION_KINDS[ActionType.WEB_FETCH] == MessageKind.BROWSER
    assert ACTION_KINDS[ActionType.MCP_TOOL] == MessageKind.MCP_TOOL
    assert ACTION_KINDS[ActionType.ASK_USER] == MessageKind.ASK_USER
    for action in ActionType:
        if action not in (ActionType.WEB_SEARCH, ActionType.WEB_FETCH):
            assert ACTION_KINDS[action].value == action.value


def test_the_action_table_and_its_aliases_only_name_defined_actions() -> None:
    assert set(ACTIONS) <= set(ActionType)
    assert set(ACTION_ALIASES.values()) <= set(ActionType)
    assert set(FILE_ACTIONS) <= set(ACTIONS)


def test_a_message_built_from_a_kind_stores_and_sends_the_plain_string() -> None:
    msg = Message.build(MessageKind.FINISH_SUMMERY, "done", json=[])
    assert type(msg.meta.action_type) is str
    assert json.loads(msg.to_json())["meta"]["action_type"] == "finish_summery"
    assert Message.from_dict(msg.to_dict()).meta.action_type == MessageKind.FINISH_SUMMERY


def test_an_unknown_kind_still_reads_as_it_was_written() -> None:
    # readers ignore kinds they do not know (a newer writer): nothing is rejected
    assert Meta(action_type="some_future_kind").action_type == "some_future_kind"
