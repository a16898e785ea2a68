"""The shapes the store hands out, as the API sends them: a conversation (listed and in
detail), its runs and what they spent (docs/api.md "GET /api/conversations/{id}").

One model per shape: backend/api/models.py answers with these, the OpenAPI document and
the web UI's TypeScript types (backend/api/wire_types.py) are generated from them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

RunStatus = Literal["running", "waiting", "completed", "failed", "stopped"]
# a conversation: `idle` before its first run, then its last run's status
ConversationStatus = Literal["idle", "running", "waiting", "completed", "failed", "stopped"]


class UsageFigures(BaseModel):
    """What model calls spent. ``input_tokens`` (= ``prompt_tokens``) counts every input
    token, ``cached_input_tokens`` and ``cache_write_tokens`` among them the ones the
    provider's prompt cache served and stored; ``cost_usd`` (= ``cost``) is priced at the
    provider's cached rates, ``null`` when litellm does not know the model's price."""

    calls: int
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    cost: float | None
    input_tokens: int
    cached_input_tokens: int
    cache_write_tokens: int
    output_tokens: int
    cost_usd: float | None


class UsageSummary(BaseModel):
    total: UsageFigures
    stages: dict[str, UsageFigures]


class ConversationSummary(BaseModel):
    conversation_id: str
    title: str
    status: ConversationStatus
    created_at: str | None
    updated_at: str | None


class RunWait(BaseModel):
    model_config = ConfigDict(frozen=True)

    uuid: str
    kind: str | None


class RunRow(BaseModel):
    """A run as the store reads it (``Store.get_run``): a run parked on a wait is
    ``waiting`` here, ``running`` in its row."""

    model_config = ConfigDict(frozen=True)

    run_id: str
    conversation_id: str
    goal: str
    mode: str
    runtime: str
    status: RunStatus
    error: str | None
    task_type: str | None
    model: str | None
    created_at: str | None
    ended_at: str | None
    owner: str | None
    stop_requested: bool
    resumes: int
    repeated_calls: int
    mcp_servers: list[str] | None
    approval: str
    can_ask: bool
    wait: RunWait | None


# a run of a conversation in detail: its row and the tokens it spent
class RunInfo(RunRow):
    total_tokens: int
    usage: UsageFigures


class ConversationDetail(ConversationSummary):
    runs: list[RunInfo]
    usage: UsageSummary
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    cost: float | None
    input_tokens: int
    cached_input_tokens: int
    cache_write_tokens: int
    output_tokens: int
    cost_usd: float | None
