"""An approval's meta.json is read as the model it is written as (ApprovalRequest,
backend/messages/payloads.py): the digest an answer is checked against and the class that
"approve all" names come from it, the same as the JSON the code before it stored; an item
that is no ApprovalRequest (another kind's, a newer writer's) is passed over."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from backend.actions.model import Action
from backend.messages.kinds import MessageKind
from backend.messages.message import Message
from backend.messages.payloads import ApprovalRequest, ApprovalShown
from backend.waits.digest import action_digest, approval_of, digest_of

FIXTURE = Path(__file__).parents[1] / "messages" / "meta_json.fixture.json"


def _stored_approvals() -> list[list[Any]]:
    """The approvals' meta.json as the code before the models stored them."""
    before: dict[str, list[list[str]]] = json.loads(FIXTURE.read_text(encoding="utf-8"))
    msgs = [msg for scenario in before.values() for msg in scenario]
    return [json.loads(text) for kind, text in msgs if kind == "approval"]


def test_the_digest_and_class_of_each_stored_approval_are_what_it_stored() -> None:
    stored = [items for items in _stored_approvals() if items]
    assert stored, "the fixture has approvals that ask"
    for items in stored:
        request = approval_of(items)
        assert request is not None
        assert digest_of(items) == items[0]["digest"] == request.digest
        assert request.class_ == items[0]["class"]
        action = Action(type=request.action_type, params=dict(request.params))
        assert request.digest == action_digest(action.type, action.params)


def test_an_approval_read_back_from_its_json_is_the_request_written() -> None:
    written = ApprovalRequest(
        action_type="terminal_run",
        class_="terminal",
        params={"command": "rm -rf build"},
        digest=action_digest("terminal_run", {"command": "rm -rf build"}),
        shown=ApprovalShown(whole=True, note="", lines=1, chars=12),
    )
    msg = Message.build(MessageKind.APPROVAL, "rm -rf build", status="running", json=[written])
    loaded = Message.model_validate_json(msg.model_dump_json())
    assert approval_of(loaded.meta.json_) == written
    assert digest_of(loaded.meta.json_) == written.digest


def test_an_item_that_is_no_approval_request_gives_no_digest() -> None:
    # a newer writer's partial item, or another kind's: not an action anyone was shown
    for items in (
        [{"digest": "sha256:" + "0" * 64, "class": "terminal"}],
        [{"digest": 7}],
        ["sha256:" + "0" * 64],
        [],
    ):
        assert approval_of(items) is None
        assert digest_of(items) == ""
