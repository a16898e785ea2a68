"""The columns of a run's wait (store/waits.py), written in the transaction of the message
it waits on (store/messages.py)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from pydantic import BaseModel
from sqlalchemy import Connection, update

from backend.store.base import CONVERSATIONS, RUNS, fenced_update
from backend.store.tables import utcnow

WAITING = "waiting"


class WaitAnswer(BaseModel):
    """What ended a wait (backend/waits), stored with the transition for the run to read
    when it goes on (``runs.wait_answer``, JSON): the ``decision`` on an approval, or
    ``answer`` with the question's answer; ``by``: who, when not the person (``timeout``,
    ``stop``); ``digest``: the approved action's (none in answers stored before digests)."""

    uuid: str
    decision: Literal["approve", "reject", "approve_all", "answer"]
    reason: str = ""
    answer: str = ""
    digest: str = ""
    by: str = ""


@dataclass(frozen=True, slots=True)
class NewWait:
    """A wait to store with its message: on the message ``uuid``, of ``kind``, answered by
    ``until`` (else timed out)."""

    uuid: str
    kind: str
    until: datetime


def wait_values(uuid: str, kind: str, seconds: float) -> NewWait:
    """A new wait, ``seconds`` from now (stored with its message)."""
    return NewWait(uuid, kind, utcnow() + timedelta(seconds=seconds))


CLEARED = {"wait_uuid": None, "wait_kind": None, "wait_until": None}


def conversation_status(c: Connection, cid: str, status: str) -> None:
    c.execute(update(CONVERSATIONS).where(CONVERSATIONS.c.id == cid).values(status=status))


def park_in(c: Connection, run_id: str, wait: NewWait) -> None:
    """Store the wait (``wait_values``) with its message, in the message's transaction:
    the run is waiting as soon as the message can be seen (its owner lets go after)."""
    cid = c.execute(
        fenced_update(run_id)
        .values(wait_uuid=wait.uuid, wait_kind=wait.kind, wait_until=wait.until, wait_answer=None)
        .returning(RUNS.c.conversation_id)
    ).scalar_one_or_none()
    if cid is not None:
        conversation_status(c, cid, WAITING)
