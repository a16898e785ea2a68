#!/usr/bin/env bash
# The whole test suite under a CPU hog: one busy worker per core (stress-ng when installed,
# else a plain bash busy loop), stopped by PID when the suite ends (trap). Tests that wait on
# time instead of events fail here first. Run with the CI environment, e.g.
#   TEST_POSTGRES_URL=... REQUIRE_POSTGRES=1 REQUIRE_DOCKER=1 REQUIRE_BWRAP=1 \
#   REQUIRE_BROWSER=1 scripts/under-load.sh [pytest args]
# (`make frontend` first: the UI tests need the built UI). HOG_WORKERS overrides the count.
# Prints the failures and the duration; exits with pytest's status.
set -uo pipefail
cd "$(dirname "$0")/.."
UV=$(command -v uv 2>/dev/null || echo "$HOME/.local/bin/uv")
workers=${HOG_WORKERS:-$(nproc)}
hogs=()
stop_hogs() {
  local pid
  for pid in "${hogs[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${hogs[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap stop_hogs EXIT
trap 'exit 130' INT TERM
if command -v stress-ng >/dev/null 2>&1; then
  stress-ng --cpu "$workers" --quiet &
  hogs+=($!)
  echo "under-load: stress-ng --cpu $workers (pid ${hogs[*]})"
else
  for _ in $(seq 1 "$workers"); do
    bash -c 'while :; do :; done' &
    hogs+=($!)
  done
  echo "under-load: $workers busy loops (pids ${hogs[*]})"
fi
log=${UNDER_LOAD_LOG:-$(mktemp /tmp/under-load.XXXXXX.log)}
echo "under-load: pytest output in $log"
start=$(date +%s)
# --tb=native: pytest's own traceback formatting parses source and hit a CPython 3.11.7
# bug on a failure ("AST constructor recursion depth mismatch"), which ended the session
"$UV" run pytest -q --tb=native "$@" >"$log" 2>&1
status=$?
# the failures (pytest's short summary, -rfE) and the closing line
sed -n '/short test summary info/,$p' "$log" | grep -E '^(FAILED|ERROR) ' || true
tail -n 1 "$log"
echo "under-load: suite took $(( $(date +%s) - start )) s under $workers hog worker(s), pytest exit $status"
exit "$status"
