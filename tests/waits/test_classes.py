"""Which actions ask before they run: the table of docs/api.md "Runs that wait for a person", from
the registry."""

from __future__ import annotations

import pytest

from backend.actions import registry
from backend.waits import APPROVAL_MODES, asks

TABLE = {
    # action: (class, asks in never, risky, always)
    "terminal_run": ("terminal", False, True, True),
    "preview": ("terminal", False, True, True),  # a service: a command
    "web_search": ("web", False, True, True),
    "web_fetch": ("web", False, True, True),
    "mcp_tool": ("mcp", False, True, True),
    "write_code": ("edits", False, False, True),
    "edit_file": ("edits", False, False, True),
    "read_file": (None, False, False, False),
    "finish": (None, False, False, False),
    "ask_user": (None, False, False, False),
}


@pytest.mark.parametrize("name", sorted(TABLE))
def test_each_action_asks_as_the_documented_table_says(name: str) -> None:
    defn = registry.get(name)
    assert defn is not None
    cls, *expected = TABLE[name]
    assert defn.approval == cls
    assert [asks(mode, defn.approval) for mode in APPROVAL_MODES] == expected


def test_every_registered_action_is_in_the_table() -> None:
    assert {d.name for d in registry.defs()} <= set(TABLE)


def test_approve_all_of_a_class_stops_only_that_class_from_asking() -> None:
    assert not asks("always", "terminal", ["terminal"])
    assert asks("always", "edits", ["terminal"])
    assert asks("risky", "web", ["terminal"])
