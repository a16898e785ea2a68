#!/usr/bin/env bash
# Hands METRICS_TOKEN to Prometheus as a credentials file (its configuration cannot read the
# environment), then runs it with the project's configuration and alert rules.
set -euo pipefail
if [ -z "${METRICS_TOKEN:-}" ]; then
  echo "prometheus: METRICS_TOKEN is not set: put METRICS_TOKEN=<a long random string> in .env" \
       "(the API replicas and workers answer /metrics to other containers only with it)" >&2
  exit 2
fi
umask 077
printf '%s' "$METRICS_TOKEN" >/run/planact-prometheus/token
exec prometheus \
  --config.file=/etc/planact-prometheus/prometheus.yml \
  --storage.tsdb.path=/var/lib/prometheus/data \
  --storage.tsdb.retention.time="${PROMETHEUS_RETENTION:-15d}" \
  --web.listen-address=0.0.0.0:9090 \
  "$@"
