"""Token usage and cost, per model call; summed per run and per conversation."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, func, insert, select
from sqlalchemy.orm import Session

from backend.store.base import (
    USAGE,
    StoreBase,
)
from backend.store.shapes import UsageFigures, UsageSummary
from backend.store.tables import Usage, utcnow

# built once: a statement made per call costs more to build and key than to run
INSERT_USAGE = insert(USAGE)


class SqlUsage(StoreBase):
    """Usage rows, one per model call."""

    async def record_usage(
        self,
        cid: str,
        run_id: str,
        stage: str,
        model: str,
        prompt_tokens: int,
        completion_tokens: int,
        cost: float | None,
    ) -> None:
        def fn(c: Connection) -> None:
            c.execute(
                INSERT_USAGE,
                {
                    "conversation_id": cid,
                    "run_id": run_id,
                    "stage": stage,
                    "model": model,
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "cost": cost,
                    "created_at": utcnow(),
                },
            )

        await self._quick(fn)

    async def run_usage(self, run_id: str) -> UsageSummary:
        return await self._run(lambda s: usage_summary(s, Usage.run_id == run_id))


def usage_summary(s: Session, where: Any) -> UsageSummary:
    rows = s.execute(
        select(
            Usage.stage,
            func.count(),
            func.sum(Usage.prompt_tokens),
            func.sum(Usage.completion_tokens),
            func.sum(Usage.cost),
            func.count(Usage.cost),
        )
        .where(where)
        .group_by(Usage.stage)
    ).all()
    stages: dict[str, UsageFigures] = {}
    total = UsageFigures(calls=0, prompt_tokens=0, completion_tokens=0, total_tokens=0, cost=None)
    for stage, calls, pt, ct, cost, costed in rows:
        pt, ct = int(pt or 0), int(ct or 0)
        stage_cost = float(cost) if costed and cost is not None else None
        stages[stage] = UsageFigures(
            calls=calls,
            prompt_tokens=pt,
            completion_tokens=ct,
            total_tokens=pt + ct,
            cost=stage_cost,
        )
        total.calls += calls
        total.prompt_tokens += pt
        total.completion_tokens += ct
        total.total_tokens += pt + ct
        if stage_cost is not None:
            total.cost = (total.cost or 0.0) + stage_cost
    return UsageSummary(total=total, stages=stages)


def run_tokens(s: Session, cid: str) -> dict[str, int]:
    """Tokens spent by each run of conversation ``cid`` (prompt + completion)."""
    rows = s.execute(
        select(Usage.run_id, func.sum(Usage.prompt_tokens + Usage.completion_tokens))
        .where(Usage.conversation_id == cid)
        .group_by(Usage.run_id)
    ).all()
    return {str(run_id): int(tokens or 0) for run_id, tokens in rows}
