"""Which actions ask before they run: the table of docs/api.md "Runs that wait for a person",
read from the docs and held against the registry."""

from __future__ import annotations

import pytest

from backend.actions import builtin_registry
from backend.waits import APPROVAL_MODES, asks
from tests.docs_check import API_DOC, ASKS, NAME, approval_table


def documented() -> dict[str, tuple[str | None, list[bool | None]]]:
    """action: (its class, whether it asks in never, risky, always), as the docs say."""
    table: dict[str, tuple[str | None, list[bool | None]]] = {}
    for names, cls, *modes in approval_table(API_DOC.read_text(encoding="utf-8")):
        for name in NAME.findall(names):
            table[name] = (None if cls == "none" else cls.strip("`"), [ASKS.get(m) for m in modes])
    return table


@pytest.mark.parametrize("name", sorted(documented()))
def test_each_action_asks_as_the_documented_table_says(name: str) -> None:
    defn = builtin_registry().get(name)
    assert defn is not None, f"docs/api.md lists {name}, which is no action"
    cls, expected = documented()[name]
    assert defn.handling.approval == cls
    assert [asks(mode, defn.handling.approval) for mode in APPROVAL_MODES] == expected


def test_every_registered_action_is_in_the_table() -> None:
    assert {d.name for d in builtin_registry().defs()} == set(documented())


def test_approve_all_of_a_class_stops_only_that_class_from_asking() -> None:
    assert not asks("always", "terminal", ["terminal"])
    assert asks("always", "edits", ["terminal"])
    assert asks("risky", "web", ["terminal"])
