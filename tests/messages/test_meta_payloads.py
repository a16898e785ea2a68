"""What a message carries in ``meta.json`` is typed per kind (docs/api.md "What meta.json
carries"), and the JSON is what it was before it was typed.

Every writer runs for real (tests/support/meta_writers.py): what it stores must be, byte for
byte, what the code before the models stored (tests/messages/meta_json.fixture.json, written
by the same module from that code), and each item must be exactly a model of its kind's
(the kind's models name every key it sends). A message stored before, and one of a kind or
with keys this code does not know (a newer writer's), still load and go out unchanged.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError
from sqlalchemy import insert

from backend.actions.registry.wire import payloads, wire_schema
from backend.messages.kinds import MessageKind
from backend.messages.message import Message
from backend.messages.payloads import (
    ApprovalRequest,
    ApprovalShown,
    BudgetNote,
    PlanTask,
    PreviewEntry,
    RunBudget,
    SummaryFile,
    SummaryPreview,
)
from backend.store.base import MESSAGES
from backend.store.repo import Store
from tests.support.meta_writers import Stored, stored_meta

FIXTURE = Path(__file__).with_name("meta_json.fixture.json")


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Stored]:
    got = asyncio.run(stored_meta(tmp_path_factory.mktemp("writers")))
    return {name: [(kind, text) for kind, text in msgs] for name, msgs in got.items()}


def test_every_writer_stores_byte_for_byte_what_it_stored_before(
    written: dict[str, Stored],
) -> None:
    before: dict[str, list[list[str]]] = json.loads(FIXTURE.read_text(encoding="utf-8"))
    assert set(written) == set(before)
    for name, msgs in written.items():
        assert [list(m) for m in msgs] == before[name], name


def _exactly(models: tuple[type[BaseModel], ...], item: Any) -> BaseModel:
    """The one of ``models`` that ``item`` is, keys and values (its dump is the item)."""
    for model in models:
        try:
            typed = model.model_validate(item)
        except ValidationError:
            continue
        if typed.model_dump(mode="json", by_alias=True, exclude_unset=True) == item:
            return typed
    raise AssertionError(f"{item!r} is none of {[m.__name__ for m in models]}")


def test_each_kinds_items_are_exactly_its_payload_models(written: dict[str, Stored]) -> None:
    table = payloads()
    carried: set[str] = set()
    for msgs in written.values():
        for kind, text in msgs:
            items = json.loads(text)
            models = table.get(kind, ())
            if not models:
                assert items == [], f"{kind} carries items but names no payload model"
                continue
            for item in items:
                _exactly(models, item)
                carried.add(kind)
    # every kind the fixture recorded carrying items was seen carrying them (a kind whose
    # writer these scenarios do not run is its own tests': a preview's need a sandbox, a new
    # action's are in its own test file)
    before: dict[str, list[list[str]]] = json.loads(FIXTURE.read_text(encoding="utf-8"))
    recorded = {kind for msgs in before.values() for kind, text in msgs if json.loads(text)}
    assert recorded == carried


def test_build_takes_the_models_and_keeps_their_json() -> None:
    task = PlanTask(id="t1", title="T", description="d", requirement="r", status="running")
    msg = Message.build(MessageKind.TASK, "T", json=[task])
    assert msg.meta.json_ == [
        {"id": "t1", "title": "T", "description": "d", "requirement": "r", "status": "running"}
    ]
    budget = BudgetNote(
        budget=RunBudget(max_tokens=10, max_cost_usd=None, max_seconds=60.0, max_model_calls=3)
    )
    assert (
        Message.build("question", "goal", json=[budget])
        .to_json()
        .endswith(
            '"json":[{"budget":{"max_tokens":10,"max_cost_usd":null,"max_seconds":60.0,'
            '"max_model_calls":3}}],"content":"","is_active":true}}'
        )
    )
    approval = ApprovalRequest(
        action_type="terminal_run",
        class_="terminal",
        params={"command": "ls"},
        digest="sha256:x",
        shown=ApprovalShown(whole=True, note="", lines=1, chars=2),
    )
    (item,) = Message.build(MessageKind.APPROVAL, "ls", json=[approval]).meta.json_
    assert list(item) == ["action_type", "class", "params", "digest", "shown"]
    preview = PreviewEntry(name="app", port=8080, path="/", url="http://x/p/t/")
    mixed = [
        SummaryFile(filepath="a.py", filename="a.py", url="/api/files/c/a.py", filesize=3),
        SummaryPreview(preview=preview),
    ]
    summary = Message.build(MessageKind.FINISH_SUMMERY, "done", json=mixed)
    assert summary.meta.json_[1] == {"preview": preview.model_dump()}
    # a copied item (an answered wait's partner) goes in as it is
    assert Message.build(MessageKind.APPROVAL, json=[item]).meta.json_ == [item]


NEWER: dict[str, Any] = {
    "role": "assistant",
    "uuid": "u1",
    "status": "success",
    "content": "a newer writer's message",
    "comments": "",
    "memorized": "",
    "timestamp": 1,
    "type": "",
    "conversation_id": "c",
    "run_id": "r",
    "seq": 3,
    "meta": {
        "pid": "",
        "task_id": None,
        "action_type": "hologram",
        "filepath": "",
        "url": "",
        "json": [{"beam": [1, 2.5, None]}, "a string", 7, [True]],
        "content": "",
        "is_active": True,
    },
}


def test_an_unknown_kind_and_unknown_keys_load_and_go_out_unchanged() -> None:
    msg = Message.from_dict(NEWER)
    assert msg.to_dict() == NEWER
    assert list(msg.to_dict()["meta"]) == list(NEWER["meta"])
    # a known kind with a key its model does not name (a newer writer's): kept
    meta: dict[str, Any] = dict(NEWER["meta"])
    task = {"id": "t", "title": "T", "description": "", "requirement": "", "status": "running"}
    meta.update(action_type="task", json=[{**task, "owner": "someone"}])
    newer_task = Message.from_dict({**NEWER, "meta": meta})
    assert newer_task.meta.json_ == [{**task, "owner": "someone"}]


async def _stored_raw(store: Store, action_type: str, meta: dict[str, Any]) -> Message:
    """A message row as the code before wrote it, inserted as it was, then read back."""
    cid = await store.create_conversation("1", "old")

    def put(c: Any) -> None:
        c.execute(
            insert(MESSAGES),
            [
                {
                    "conversation_id": cid,
                    "run_id": "r-old",
                    "seq": 1,
                    "uuid": "u-old",
                    "role": "assistant",
                    "status": "success",
                    "action_type": action_type,
                    "content": "stored before",
                    "meta": meta,
                    "timestamp": 1,
                }
            ],
        )

    await store._core(put)
    (msg,) = await store.messages(cid)
    return msg


async def test_messages_stored_before_load_with_their_json_unchanged(db_url: str) -> None:
    before: dict[str, list[list[str]]] = json.loads(FIXTURE.read_text(encoding="utf-8"))
    rows = [(kind, json.loads(text)) for msgs in before.values() for kind, text in msgs]
    rows += [("hologram", NEWER["meta"]["json"])]
    store = Store(db_url)
    try:
        for kind, items in rows:
            meta = {**NEWER["meta"], "action_type": kind, "json": items}
            msg = await _stored_raw(store, kind, meta)
            assert msg.to_dict()["meta"] == meta
            assert json.loads(msg.to_json())["meta"]["json"] == items
    finally:
        await store.close()


def test_the_schema_says_what_each_kind_carries() -> None:
    defs = wire_schema()["$defs"]
    said = defs["MetaPayloads"]["properties"]
    for kind, models in payloads().items():
        if not models:
            assert kind not in said
            continue
        items = said[kind]["items"]
        refs = [r["$ref"] for r in items.get("anyOf", [items])]
        assert refs == [f"#/$defs/{m.__name__}" for m in models], kind
    # an item of meta.json is one of them, or an unknown kind's object
    assert defs["Meta"]["properties"]["json"]["items"] == {"$ref": "#/$defs/MetaItem"}
    union = [r["$ref"].rsplit("/", 1)[1] for r in defs["MetaItem"]["anyOf"]]
    assert union[-1] == "UnknownItem" and {"PlanTask", "CommandRun", "McpCall"} <= set(union)


def test_the_docs_name_what_each_kind_carries() -> None:
    api = Path(__file__).resolve().parents[2] / "docs" / "api.md"
    section = api.read_text(encoding="utf-8").split("### What meta.json carries", 1)[1]
    rows = [line for line in section.split("\n## ", 1)[0].split("\n") if line.startswith("| `")]
    for kind, models in payloads().items():
        if not models:
            continue
        row = next((line for line in rows if f"`{kind}`" in line.split(" | ")[0]), "")
        assert row, f"docs/api.md does not say what {kind} carries"
        for model in models:
            assert model.__name__ in row, f"{kind}: {model.__name__} missing from its row"
