"""A task of the plan, as ``plan`` and ``task`` messages carry it in ``meta.json``
(docs/api.md "The stream"): the plan lists every task, each ``task`` message its own.

The planner builds each task through this model, a run's checkpoint holds its plan in it
(backend/agent/state.py) and the store reads them back through it; the web UI's type is
generated from it (backend/api/wire_types.py -> api.gen.ts).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

TaskStatus = Literal["pending", "running", "completed", "failed"]


class PlanTask(BaseModel):
    id: str
    title: str
    description: str
    requirement: str
    status: TaskStatus
