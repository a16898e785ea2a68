"""How `planact run` prints an action's result (``ActionDef.shown.show``): its show is given the
message's meta.json read as the action's own payload models (ActionDef.payload), the stored
JSON of each item, not the dicts; an item that is none of its models (a newer writer's) is
passed over, so what is printed is what the action's own items say."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from backend.actions.model import ActionSpec
from backend.actions.registry import ActionDef, Done, Registry, Shown, builtin_registry
from backend.actions.registry.builtin.terminal_run import CommandRun
from backend.actions.registry.builtin.web_search import SearchHit
from backend.messages.payloads import plain_items

REGISTRY = builtin_registry()


class Tally(BaseModel):
    count: int


class Label(BaseModel):
    label: str


got: list[list[object]] = []


def _show(content: str, data: list[Tally | Label]) -> str:
    got.append(list(data))
    return f"{content}: " + ", ".join(type(d).__name__ for d in data)


async def _never(*_: object) -> Done:
    raise AssertionError("not run here")


@pytest.fixture
def tally() -> Registry:
    """A registry of its own with the action (the builtin one never has it)."""
    got.clear()
    return REGISTRY.with_actions(
        ActionDef(
            spec=ActionSpec(
                name="tally_up", description="Count.", required=(), example="<tally_up/>"
            ),
            kind="tally",
            handler=_never,
            payload=(Tally, Label),
            shown=Shown(show=_show),
        )
    )


def test_a_show_gets_the_stored_items_as_its_payload_models(tally: Registry) -> None:
    stored = [{"count": 3}, {"label": "three"}, {"newer": True}]  # JSON as stored
    assert tally.show("tally", "done", stored) == "done: Tally, Label"
    assert got == [[Tally(count=3), Label(label="three")]]


def test_a_show_gets_nothing_of_items_it_does_not_know(tally: Registry) -> None:
    assert tally.show("tally", "done", [{"count": "many"}, "a string", 7]) == "done: "
    assert got == [[]]


def test_a_search_prints_its_hits_and_passes_over_a_newer_item() -> None:
    hits = [SearchHit(title="Planact", url="https://example.org/a", snippet="s")]
    alone = REGISTRY.show("search", "1 result", plain_items(hits))
    assert alone == "Planact\n  https://example.org/a"
    assert (
        REGISTRY.show("search", "1 result", [*plain_items(hits), {"ranked_by": "newer"}]) == alone
    )


def test_a_command_is_printed_from_its_item_wherever_it_stands() -> None:
    run = CommandRun(command="ls", exit_code=0, stdout="a\n", stderr="", timed_out=False, note="")
    printed = REGISTRY.show(
        "terminal_run", "Exit code: 0", [{"progress": "newer"}, *plain_items([run])]
    )
    assert printed == "$ ls  [exit 0]\n| a"
