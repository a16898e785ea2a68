"""Token usage and cost, per model call; summed per run and per conversation.

``prompt_tokens`` counts every input token of a call; ``cached_input_tokens`` and
``cache_write_tokens`` are the part of them the provider's prompt cache served or stored
(priced at its cached rates: ``cost`` is what the provider bills)."""

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

_SUMS = (
    func.count(),
    func.sum(Usage.prompt_tokens),
    func.sum(Usage.completion_tokens),
    func.sum(Usage.cached_input_tokens),
    func.sum(Usage.cache_write_tokens),
    func.sum(Usage.cost),
    func.count(Usage.cost),
)


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
        *,
        cached_input_tokens: int = 0,
        cache_write_tokens: int = 0,
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
                    "cached_input_tokens": cached_input_tokens,
                    "cache_write_tokens": cache_write_tokens,
                    "cost": cost,
                    "created_at": utcnow(),
                },
            )

        await self._quick(fn)

    async def run_usage(self, run_id: str) -> UsageSummary:
        return await self._run(lambda s: usage_summary(s, Usage.run_id == run_id))


def figures(
    calls: int,
    prompt: int,
    completion: int,
    cached: int,
    written: int,
    cost: float | None,
) -> UsageFigures:
    return UsageFigures(
        calls=calls,
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=prompt + completion,
        cost=cost,
        input_tokens=prompt,
        cached_input_tokens=cached,
        cache_write_tokens=written,
        output_tokens=completion,
        cost_usd=cost,
    )


def _row(
    calls: Any, pt: Any, ct: Any, cached: Any, written: Any, cost: Any, costed: Any
) -> UsageFigures:
    price = float(cost) if costed and cost is not None else None
    return figures(
        int(calls or 0), int(pt or 0), int(ct or 0), int(cached or 0), int(written or 0), price
    )


def add(total: UsageFigures, part: UsageFigures) -> UsageFigures:
    cost = total.cost
    if part.cost is not None:
        cost = (cost or 0.0) + part.cost
    return figures(
        total.calls + part.calls,
        total.prompt_tokens + part.prompt_tokens,
        total.completion_tokens + part.completion_tokens,
        total.cached_input_tokens + part.cached_input_tokens,
        total.cache_write_tokens + part.cache_write_tokens,
        cost,
    )


def usage_summary(s: Session, where: Any) -> UsageSummary:
    rows = s.execute(select(Usage.stage, *_SUMS).where(where).group_by(Usage.stage)).all()
    stages: dict[str, UsageFigures] = {}
    total = figures(0, 0, 0, 0, 0, None)
    for stage, *sums in rows:
        stages[stage] = _row(*sums)
        total = add(total, stages[stage])
    return UsageSummary(total=total, stages=stages)


def run_usages(s: Session, cid: str) -> dict[str, UsageFigures]:
    """What each run of conversation ``cid`` spent."""
    rows = s.execute(
        select(Usage.run_id, *_SUMS).where(Usage.conversation_id == cid).group_by(Usage.run_id)
    ).all()
    return {str(run_id): _row(*sums) for run_id, *sums in rows}
