"""Answering a parked run: an approval decision, an answer to a question, a timeout.

One atomic store transition ends the wait (store/waits.py ``end_wait``: only the run still
waiting on that message changes, so of two answers racing on two processes exactly one
wins), in the same transaction as the wait message's final partner and the answer the
run reads when it resumes. Then the process's run manager resumes the run from its
checkpoint: here (inline) or queued for a worker (``EXECUTOR=queue``).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol

from backend.messages.message import Message
from backend.store.parked import WaitAnswer
from backend.store.rows import ExpiredWait
from backend.waits.classes import APPROVAL, ASK_USER, DECISIONS
from backend.waits.digest import approval_of, digest_of
from backend.waits.errors import BadAnswer, WaitConflict, WaitNotFound
from backend.waits.replies import Answered, Decision

if TYPE_CHECKING:
    from backend.config import Settings
    from backend.messages.bus import Bus
    from backend.store.repo import Store

log = logging.getLogger(__name__)

REASON_LIMIT = 4_000
ANSWER_LIMIT = 100_000


class Host(Protocol):
    """What answering needs of the process's run manager (backend/runs/manager.py)."""

    settings: Settings
    store: Store
    bus: Bus

    def answer_owner(self) -> str | None:
        """The owner a run answered here goes on with (None: queued for a worker)."""

    async def resume_answered(self, run_id: str) -> None:
        """Execute the run the answer took (here, or queued for a worker)."""


def _text(value: object, name: str, limit: int, required: bool) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise BadAnswer(f"'{name}' must be a string.")
    if len(value) > limit:
        raise BadAnswer(f"'{name}' is longer than {limit} characters.")
    if required and not value.strip():
        raise BadAnswer(f"'{name}' is required: a non-empty string.")
    return value


async def answer_approval(
    host: Host,
    run_id: str,
    uuid: str,
    decision: object,
    reason: object = None,
    *,
    user_id: str | None = None,
    digest: object = None,
) -> Decision:
    """Decide the approval ``uuid`` of ``run_id``: ``decision`` is "approve", "reject" or
    "approve_all" (every later action of the same class in this run), ``reason`` an optional
    text (<= 4,000 characters) the model reads with a rejection. ``user_id``: the run must be
    that user's (None: any, e.g. the CLI's own run). ``digest``: the action's digest as the
    person was shown it (backend/waits/digest.py); another than the waiting action's is a
    WaitConflict. Returns the :class:`Decision`; raises BadAnswer (400),
    WaitNotFound (404), WaitConflict (409): nothing changed then."""
    if decision not in DECISIONS:
        raise BadAnswer(f"'decision' must be one of {', '.join(DECISIONS)}.")
    decided = Decision(decision=decision)
    why = _text(reason, "reason", REASON_LIMIT, required=False).strip()
    if digest is not None and not isinstance(digest, str):
        raise BadAnswer("'digest' must be a string (the approval's meta.json digest).")
    waiting = await _waiting(host, run_id, uuid, APPROVAL, user_id)
    shown = digest_of(waiting.meta.json_)
    if digest is not None and digest != shown:
        raise WaitConflict(
            "This approval is for another action than the one you were shown (its digest is "
            f"{shown[:80]!r}, yours {digest[:80]!r}): look at it again before deciding."
        )
    action_class = _class_of(waiting)
    if decided.decision == "approve":
        content, status = "Approved", "success"
    elif decided.decision == "approve_all":
        content, status = f"Approved, with every later {action_class} action of this run", "success"
    else:
        content, status = why or "Rejected (no reason given).", "failure"
    answer = WaitAnswer(uuid=uuid, decision=decided.decision, reason=why, digest=shown)
    await _end(host, run_id, waiting, content, status, answer)
    return decided


async def answer_question(
    host: Host, run_id: str, uuid: str, answer: object, *, user_id: str | None = None
) -> Answered:
    """Answer the question ``uuid`` (an ask_user message) of ``run_id`` with ``answer`` (a
    non-empty string): it is the action's result for the model. Returns :class:`Answered`;
    raises as :func:`answer_approval`."""
    text = _text(answer, "answer", ANSWER_LIMIT, required=True)
    waiting = await _waiting(host, run_id, uuid, ASK_USER, user_id)
    await _end(
        host,
        run_id,
        waiting,
        text,
        "success",
        WaitAnswer(uuid=uuid, decision="answer", answer=text),
    )
    return Answered(answer=text)


async def expire_waits(
    host: Host, run_ids: set[str] | None = None, expired: list[ExpiredWait] | None = None
) -> int:
    """Reject every wait past its deadline (APPROVAL_TIMEOUT) with a reason the model
    reads; the run goes on. Any live process may sweep: one wins each wait. Returns how
    many this call ended. ``run_ids``: only these runs (None: all). ``expired``: the waits
    past their deadline as a recovery round read them (None: read now)."""
    seconds = host.settings.approval_timeout
    done = 0
    for wait in expired if expired is not None else await host.store.expired_waits():
        if run_ids is not None and wait.run_id not in run_ids:
            continue
        found = await host.store.wait_message(wait.run_id, wait.uuid)
        if found is None or found[1]:
            continue
        waiting = found[0]
        what = "approved" if wait.kind == APPROVAL else "answered"
        reason = (
            f"Nobody {what} it within {seconds:g} seconds (APPROVAL_TIMEOUT), so it was not "
            "done. Go on without it, or finish and say what is left to do."
        )
        answer = WaitAnswer(uuid=wait.uuid, decision="reject", reason=reason, by="timeout")
        try:
            await _end(host, wait.run_id, waiting, reason, "failure", answer)
        except WaitConflict:
            continue  # answered (or swept by another process) first
        done += 1
    return done


async def _waiting(host: Host, run_id: str, uuid: str, kind: str, user_id: str | None) -> Message:
    run = await host.store.get_run(run_id, user_id)
    if run is None:
        raise WaitNotFound(f"No run {run_id[:80]!r}.")
    found = await host.store.wait_message(run_id, uuid)
    what = "approval" if kind == APPROVAL else "question"
    if found is None or found[0].meta.action_type != kind:
        raise WaitNotFound(f"No {what} {uuid[:80]!r} in run {run_id[:80]!r}.")
    if found[1]:
        raise WaitConflict(f"This {what} is no longer pending: it was answered or ended.")
    return found[0]


async def _end(
    host: Host,
    run_id: str,
    waiting: Message,
    content: str,
    status: str,
    answer: WaitAnswer,
) -> None:
    kind = waiting.meta.action_type
    partner = Message.build(
        kind,
        content,
        status="success" if status == "success" else "failure",
        task_id=waiting.meta.task_id,
        filepath=waiting.meta.filepath,
        json=list(waiting.meta.json_),
        uuid=waiting.uuid,
        meta_content=waiting.meta.content,
    )
    stored = await host.store.end_wait(
        run_id, waiting.uuid, kind, host.answer_owner(), answer, partner
    )
    if stored is None:
        what = "approval" if kind == APPROVAL else "question"
        raise WaitConflict(f"This {what} is no longer pending: it was answered or ended.")
    host.bus.publish(run_id, stored)
    await host.resume_answered(run_id)


def _class_of(waiting: Message) -> str:
    request = approval_of(waiting.meta.json_)
    return request.class_ if request and request.class_ else "such"
