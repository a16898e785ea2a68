"""What answering a wait gives back (docs/api.md "Runs that wait for a person"): the API
answers with these models as they are, the web UI reads their generated types."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

# a person's decision on an approval (``approve_all``: every later action of its class)
ApprovalDecision = Literal["approve", "reject", "approve_all"]


class Decision(BaseModel):
    decision: ApprovalDecision


class Answered(BaseModel):
    answer: str
