"""The Store: every read and write of the product's state, one part per aggregate.

    conversations.py  conversations, titles, the files of their workspace
    runs.py           runs and their tasks
    leases.py         instances, leases, claims and stop requests
    messages.py       messages (seq)
    usage.py          token usage and cost
    waits.py          runs parked while they wait for a person
    checkpoints.py    the index of workspace checkpoints, rewinds, forks, share links
    recovery.py       a recovery round's reads, in one transaction

Each part is a mixin over :class:`~backend.store.base.StoreBase` (the engine and its one
database thread); :class:`Store` is all of them: callers take a ``Store`` and import from
here. (One implementation, so no Protocol per aggregate: the contract suite in tests/store/
runs every part over SQLite and PostgreSQL.)
"""

from __future__ import annotations

from backend.store.base import (
    ACTIVE,
    CONTROL_CHANNEL,
    MESSAGE_CHANNEL,
    UPLOAD_RUN,
    ConflictError,
    NotFoundError,
    RestoringError,
    RunNotOwned,
    new_id,
)
from backend.store.checkpoints import SqlCheckpoints
from backend.store.conversations import SqlConversations
from backend.store.leases import SqlLeases
from backend.store.messages import SqlMessages
from backend.store.previews import SqlPreviews
from backend.store.recovery import SqlRecovery
from backend.store.runs import SqlRuns
from backend.store.usage import SqlUsage
from backend.store.waits import WAITING, SqlWaits

__all__ = [
    "ACTIVE",
    "CONTROL_CHANNEL",
    "MESSAGE_CHANNEL",
    "UPLOAD_RUN",
    "WAITING",
    "ConflictError",
    "NotFoundError",
    "RestoringError",
    "RunNotOwned",
    "Store",
    "new_id",
]


class Store(
    SqlConversations,
    SqlRuns,
    SqlLeases,
    SqlWaits,
    SqlMessages,
    SqlUsage,
    SqlPreviews,
    SqlRecovery,
    SqlCheckpoints,
):
    """SQLite or PostgreSQL (``url``), migrated by :meth:`migrate`."""
