"""Every step is a place to go back to: checkpoints of a conversation's workspace (a shadow
git repository per conversation, gitrepo.py), indexed in the store by the message they
follow; compare, rewind, fork and share are reads of that history (service.py); a run takes
them after its actions and at its end (run.py)."""

from backend.checkpoints.service import (
    END_OF_RUN,
    CheckpointNotFound,
    Checkpoints,
    FileDiff,
    SharedFile,
)

__all__ = ["END_OF_RUN", "CheckpointNotFound", "Checkpoints", "FileDiff", "SharedFile"]
