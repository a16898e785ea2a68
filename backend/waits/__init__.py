"""Runs that wait for a person (docs/api.md "Runs that wait for a person"): the seam the API and
the CLI call.

A run that needs a person (an approval before an action, or the model's ``ask_user``
question) publishes the message it waits on and parks in the store (backend/agent/asking.py,
store/waits.py): status ``waiting``, no owner, no process, no worker slot. These functions
answer it from any process; ``host`` is that process's ``RunManager``:

    await answer_approval(manager, run_id, uuid, "approve" | "reject" | "approve_all",
                          reason=None, user_id=None, digest=None) -> {"decision": ...}
    await answer_question(manager, run_id, uuid, "the answer", user_id=None) -> {"answer": ...}
    await expire_waits(manager) -> int        # the APPROVAL_TIMEOUT sweep (lease keeper)

``uuid`` is that of the `approval` / `ask_user` message (status running). ``digest``: the
action's digest the person was shown (backend/waits/digest.py): another one is a 409, and
the resumed run runs the action only if it still has the digest that was approved. ``user_id``: the
run must belong to that user (the API passes the caller; the CLI passes None). Errors are
typed (backend/waits/errors.py), nothing changed when raised: BadAnswer (400: a decision
other than the three, a reason over 4,000 characters, an empty answer), WaitNotFound (404:
unknown run, another user's, unknown uuid, or the uuid of the other kind of wait),
WaitConflict (409: no longer pending, e.g. a second answer). On success the wait message
has its final partner (`success` "Approved" / the answer; `failure` with the reason) and
the run goes on: in this process with EXECUTOR=inline (also `planact run`), queued for a
worker with EXECUTOR=queue.

Which actions ask: backend/waits/classes.py (``asks``, the table).
"""

from backend.waits.answers import answer_approval, answer_question, expire_waits
from backend.waits.classes import APPROVAL_MODES, DECISIONS, asks
from backend.waits.digest import action_digest
from backend.waits.errors import BadAnswer, WaitConflict, WaitError, WaitNotFound

__all__ = [
    "APPROVAL_MODES",
    "DECISIONS",
    "BadAnswer",
    "WaitConflict",
    "WaitError",
    "WaitNotFound",
    "action_digest",
    "answer_approval",
    "answer_question",
    "asks",
    "expire_waits",
]
