"""The message kinds of the run's own structure, and how an action's kind reaches the wire
(docs/api.md "The stream"; the actions' kinds are their definitions', backend/actions/registry)."""

from __future__ import annotations

import json

from backend.actions import builtin_registry
from backend.actions.registry.wire import action_types, message_kinds
from backend.messages.kinds import MessageKind
from backend.messages.message import Message, Meta


def test_the_runs_own_kinds_are_defined_with_their_wire_spelling() -> None:
    wire = {
        "question", "auto_reply", "plan", "task", "thinking", "finish", "finish_summery",
        "error", "stop", "approval", "ask_user", "summary",
    }  # fmt: skip
    assert {k.value for k in MessageKind} == wire
    assert MessageKind.FINISH_SUMMERY.value == "finish_summery"


registry = builtin_registry()


def test_the_wire_kinds_are_the_runs_own_and_every_actions_each_once() -> None:
    values = [value for _, value in message_kinds().members]
    assert len(values) == len(set(values))
    assert set(values) == {k.value for k in MessageKind} | {d.kind for d in registry.defs()}
    assert [v for _, v in action_types().members] == [d.name for d in registry.defs()]


def test_an_actions_kind_on_the_wire_is_its_definitions() -> None:
    # (docs/api.md's table of the action kinds is made from the same definitions)
    members = dict(message_kinds().members)
    for defn in registry.defs():
        assert defn.kind in members.values(), defn.name
    renamed = {d.name: d.kind for d in registry.defs() if d.kind != d.name}
    assert all(registry.kind_of(name) == kind for name, kind in renamed.items())


def test_the_aliases_only_name_defined_actions() -> None:
    vocab = registry.vocabulary
    assert set(vocab.aliases.values()) <= set(vocab.known)
    assert {d.name for d in registry.defs()} == set(vocab.known)


def test_a_message_built_from_a_kind_stores_and_sends_the_plain_string() -> None:
    msg = Message.build(MessageKind.FINISH_SUMMERY, "done", json=[])
    assert type(msg.meta.action_type) is str
    assert json.loads(msg.to_json())["meta"]["action_type"] == "finish_summery"
    assert Message.from_dict(msg.to_dict()).meta.action_type == MessageKind.FINISH_SUMMERY


def test_an_unknown_kind_still_reads_as_it_was_written() -> None:
    # readers ignore kinds they do not know (a newer writer): nothing is rejected
    assert Meta(action_type="some_future_kind").action_type == "some_future_kind"
