"""The preview listener's families (docs/api.md "Metrics"): requests by status, bytes each
way, connections open and refused, malformed requests by reason. (Services by state are the
store's, for the whole deployment: store_collector.py.)"""

from __future__ import annotations

from prometheus_client import Counter, Gauge

from backend.observe.metrics import REGISTRY

MALFORMED_REASONS = ("too_large", "malformed", "timeout")

REQUESTS = Counter(
    "planact_preview_requests",
    "Requests to the preview listener, by the status they were answered (the app's, or the "
    "proxy's own 404, 431, 502...).",
    ["status"],
    registry=REGISTRY,
)
BYTES = Counter(
    "planact_preview_bytes",
    "Body bytes through the preview listener, by direction (in: to the app, out: to the browser).",
    ["direction"],
    registry=REGISTRY,
)
CONNECTIONS = Gauge(
    "planact_preview_connections",
    "Client connections the preview listener serves now.",
    registry=REGISTRY,
)
REFUSED = Counter(
    "planact_preview_connections_refused",
    "Client connections refused at once: PREVIEW_MAX_CONNECTIONS were open.",
    registry=REGISTRY,
)
MALFORMED = Counter(
    "planact_preview_malformed_requests",
    "Requests refused before a preview was looked up, by reason (too_large: a head over 64 "
    "KiB; malformed: a head HTTP does not allow; timeout: a head or body that stalled).",
    ["reason"],
    registry=REGISTRY,
)
for _way in ("in", "out"):
    BYTES.labels(_way)
for _reason in MALFORMED_REASONS:
    MALFORMED.labels(_reason)


def request(status: int) -> None:
    REQUESTS.labels(str(status) if 100 <= status <= 599 else "other").inc()


def moved(direction: str, count: int) -> None:
    if count:
        BYTES.labels(direction).inc(count)


def malformed(reason: str) -> None:
    MALFORMED.labels(reason if reason in MALFORMED_REASONS else "malformed").inc()
