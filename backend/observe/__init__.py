"""Metrics (Prometheus) and traces (OpenTelemetry), emitted from the few places that see
every step: the model client (backend/llm/dispatch.py), the action registry's dispatch, the
run's executor and its messages, the store where a run ends or a wait is answered, the feed
that streams a run. Labels are bounded (labels.py); content stays out of spans unless the
operator turns capture on (tracing.py)."""
