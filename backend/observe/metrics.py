"""The Prometheus families of a process (prefix ``planact_``), on one registry of its own.

Each process (a server, a worker) counts what it did; Prometheus scrapes every process and
sums. The families read from the store at scrape time (runs active and waiting, queued jobs:
store_collector.py) are the whole deployment's, the same on every target."""

from __future__ import annotations

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
)

from backend.observe.labels import ACTION_STATUSES, DECISIONS, RUN_STATUSES, bounded

# no `_created` series: half the text, and nothing an alert uses
disable_created_metrics()  # type: ignore[no-untyped-call]
REGISTRY = CollectorRegistry(auto_describe=True)

# seconds: from a quick local model to a slow reasoning one
CALL_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600)
FIRST_TOKEN_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60)
ACTION_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)

RUNS = Counter(
    "planact_runs", "Runs ended by this process, by final status.", ["status"], registry=REGISTRY
)
MODEL_CALLS = Counter(
    "planact_model_calls",
    "Model calls by model, stage and outcome (ok, error, timeout, config_error, cancelled).",
    ["model", "stage", "outcome"],
    registry=REGISTRY,
)
MODEL_SECONDS = Histogram(
    "planact_model_call_seconds",
    "Seconds a model call took (retries included), by model and stage.",
    ["model", "stage"],
    buckets=CALL_BUCKETS,
    registry=REGISTRY,
)
FIRST_TOKEN = Histogram(
    "planact_model_time_to_first_token_seconds",
    "Seconds from a model call's start to the first piece of its reply, by model and stage.",
    ["model", "stage"],
    buckets=FIRST_TOKEN_BUCKETS,
    registry=REGISTRY,
)
TOKENS = Counter(
    "planact_model_tokens",
    "Tokens by model and kind (input, output).",
    ["model", "kind"],
    registry=REGISTRY,
)
COST = Counter(
    "planact_model_cost_usd",
    "Cost of the model calls in US dollars (where the price is known), by model.",
    ["model"],
    registry=REGISTRY,
)
CACHE_TOKENS = Counter(
    "planact_model_cached_input_tokens",
    "Input tokens the provider's prompt cache served (read) or stored (write), by model; "
    "part of planact_model_tokens' input.",
    ["model", "kind"],
    registry=REGISTRY,
)
CACHE_COST = Counter(
    "planact_model_cached_input_cost_usd",
    "The part of planact_model_cost_usd paid for cached input (reads and writes at the "
    "provider's cached rates), by model.",
    ["model"],
    registry=REGISTRY,
)
ACTIONS = Counter(
    "planact_actions",
    "Actions run, by type (the action registry's) and status (success, failure, error).",
    ["type", "status"],
    registry=REGISTRY,
)
ACTION_SECONDS = Histogram(
    "planact_action_seconds",
    "Seconds an action took, by type.",
    ["type"],
    buckets=ACTION_BUCKETS,
    registry=REGISTRY,
)
APPROVALS = Counter(
    "planact_approvals",
    "Approvals decided, by decision (approve, approve_all, reject, timeout).",
    ["decision"],
    registry=REGISTRY,
)
RESUMES = Counter(
    "planact_resumes",
    "Runs this process went on with from a checkpoint (taken over, handed over, answered).",
    registry=REGISTRY,
)
OPEN_STREAMS = Gauge(
    "planact_open_streams",
    "Streams of a run's events open in this process (SSE and the LemonAI client's).",
    registry=REGISTRY,
)

for _status in sorted(RUN_STATUSES):  # present at 0 from the start (rates, absent alerts)
    RUNS.labels(_status)


def run_ended(status: str) -> None:
    RUNS.labels(bounded(status, RUN_STATUSES)).inc()


def action_done(action_type: str, status: str, seconds: float) -> None:
    """``action_type``: a registered action's type (the caller bounds it)."""
    ACTIONS.labels(action_type, bounded(status, ACTION_STATUSES)).inc()
    ACTION_SECONDS.labels(action_type).observe(seconds)


def approval_decided(decision: str) -> None:
    APPROVALS.labels(bounded(decision, DECISIONS)).inc()


def resumed() -> None:
    RESUMES.inc()


# checkpoints of the workspaces (backend/checkpoints)
CHECKPOINT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
CHECKPOINTS = Counter(
    "planact_checkpoints",
    "Workspace checkpoints by outcome (taken, unchanged: nothing changed, failed, pruned).",
    ["outcome"],
    registry=REGISTRY,
)
CHECKPOINT_BYTES = Counter(
    "planact_checkpoint_bytes",
    "Bytes the checkpoints taken here added to their repositories (git objects on disk).",
    registry=REGISTRY,
)
CHECKPOINT_SECONDS = Histogram(
    "planact_checkpoint_seconds",
    "Seconds a checkpoint took (off the event loop), by operation (take, rewind, fork).",
    ["operation"],
    buckets=CHECKPOINT_BUCKETS,
    registry=REGISTRY,
)
for _outcome in ("taken", "unchanged", "failed", "pruned"):
    CHECKPOINTS.labels(_outcome)
