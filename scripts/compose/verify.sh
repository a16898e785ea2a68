#!/usr/bin/env bash
# Verify the containerized deployment end to end (CI runs it from scripts/ci.d/40-compose.sh;
# it runs by hand too, from any directory):
#   1. build the app, sandbox and (with the postgres pass) PostgreSQL images with Compose;
#   2. `docker compose up -d`, wait for /api/health, time it;
#   3. a goal against a fake OpenAI-compatible model server on the host (tests/fakellm.py,
#      reached from the container as host.docker.internal): follow the stream to
#      finish_summery, download the files, compare bytes; the command runs in a sandbox
#      container started by the app through the mounted Docker socket (RUNTIME=docker);
#   4. `docker compose down` (volumes kept) + `up -d`: the conversation and files are still there;
#   5. `docker compose down -v`.
# Passes: "sqlite" (default), "postgres" (profile postgres) and "scaled" (profile scaled:
# PostgreSQL, two API replicas, two workers, EXECUTOR=queue, Prometheus; the goal must be
# run by a worker and be readable on both replicas, and Prometheus must count it). VERIFY_PASSES="sqlite" skips the others.
# Uses its own project name (planact-verify), env file (the variables of the calling shell
# do not leak in) and port: a developer's .env and stack are left alone. Caveat, until the
# docker runtime labels sandboxes with the host path of their workspace root: two
# deployments on one engine both use /app/workspace in their containers, and an app that
# starts removes the other's sandbox containers as orphans. Images stay (the layer cache
# makes a rerun with unchanged inputs quick).
#
# Environment (all optional):
#   VERIFY_PASSES    "sqlite postgres scaled"
#   VERIFY_OVERRIDE  compose override file; default scripts/compose/ci.override.yml (local
#                    base image, no registry); empty = the official images of docker-compose.yml
#   BASE_IMAGE       local base for the override (planact-base:bookworm)
#   VERIFY_RUNTIME   runtime of the checked run, set in its env file and its request; unset:
#                    neither names one, so the run uses the app image's default (docker)
#   VERIFY_REPORT    file to append the measured figures to (markdown lines)
#   VERIFY_TIMEOUT   seconds for each wait on health / a run (120)
#   VERIFY_PROJECT, VERIFY_IMAGE  compose project name (planact-verify) and app image tag
#                    (planact:latest): two checks on one engine keep apart
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
say() { echo "verify: $*" >&2; }
die() { say "FAIL: $*"; exit 1; }

passes=${VERIFY_PASSES:-sqlite postgres scaled}
override=${VERIFY_OVERRIDE-scripts/compose/ci.override.yml}
runtime=${VERIFY_RUNTIME:-docker}
by_default=()
[ -n "${VERIFY_RUNTIME:-}" ] || by_default=(--by-default)
wait_s=${VERIFY_TIMEOUT:-120}
project=${VERIFY_PROJECT:-planact-verify}
BASE_IMAGE=${BASE_IMAGE:-planact-base:bookworm}

# ---- preconditions -----------------------------------------------------------------------
docker info >/dev/null 2>&1 || die "no Docker engine answers 'docker info' (scripts/docker/engine.sh starts one)"
bash scripts/compose/ensure-compose.sh
if [ -n "$override" ]; then
  docker image inspect "$BASE_IMAGE" >/dev/null 2>&1 \
    || die "base image $BASE_IMAGE is missing (scripts/docker/base-image.sh builds it)"
fi
# the project's environment (uv and the locked dependencies) runs the fake model server
make --no-print-directory setup >&2 || die "make setup failed"

tmp=$(mktemp -d)
fake_pid=
cleanup() {
  local rc=$?
  set +e
  if [ "$rc" != 0 ] && [ -n "${compose_args:-}" ]; then
    say "logs of the app container (last 60 lines):"
    compose logs --no-color --tail 60 app >&2 2>/dev/null
  fi
  remove_sandboxes
  [ -n "${compose_args:-}" ] && compose --profile postgres --profile scaled down -v --remove-orphans >/dev/null 2>&1
  [ -n "$fake_pid" ] && kill "$fake_pid" 2>/dev/null && wait "$fake_pid" 2>/dev/null
  rm -rf "$tmp"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 143' TERM INT

# Sandbox containers are the app's, not Compose's: remove the ones that bind-mount this
# project's workspace volume before the volume goes.
remove_sandboxes() {
  local id
  for id in $(docker ps -aq --filter label=planact.sandbox 2>/dev/null); do
    if docker inspect -f '{{range .Mounts}}{{.Source}} {{end}}' "$id" 2>/dev/null \
        | grep -q "/volumes/${project}_workspace/"; then
      docker rm -f "$id" >/dev/null 2>&1 || true
    fi
  done
}

# ---- the web client: built on the host when the override builds without Node ------------
if [ -n "$override" ]; then
  make --no-print-directory frontend >&2 || die "the frontend does not build (make frontend)"
fi

# ---- a fake model server on the host -------------------------------------------------------
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])'; }
fake_port=$(free_port)
app_port=$(free_port)
app_port_2=$(free_port)
prometheus_port=$(free_port)
# listens on all interfaces: containers reach the host through their network's gateway
.venv/bin/python tests/fakellm.py --host 0.0.0.0 --port "$fake_port" >"$tmp/fakellm.log" 2>&1 &
fake_pid=$!
for _ in $(seq 1 300); do
  curl -fsS -o /dev/null "http://127.0.0.1:$fake_port/v1/models" 2>/dev/null && break
  kill -0 "$fake_pid" 2>/dev/null || { cat "$tmp/fakellm.log" >&2; die "the fake model server exited"; }
  sleep 0.2
done
curl -fsS -o /dev/null "http://127.0.0.1:$fake_port/v1/models" || die "the fake model server does not answer"
say "fake model server on port $fake_port"

# ---- compose with an env file of its own -----------------------------------------------------
token=$(python3 -c 'import secrets; print(secrets.token_hex(16))')
gateway=
if [ -n "$override" ]; then
  gateway=${PLANACT_HOST_GATEWAY:-172.31.250.1}
fi
cat >"$tmp/verify.env" <<EOF
PLANACT_ENV_FILE=$tmp/verify.env
AUTH_TOKEN=$token
LLM_MODEL=openai/fake-model
LLM_API_KEY=sk-fake
LLM_BASE_URL=http://host.docker.internal:$fake_port/v1
LLM_MAX_RETRIES=0
${VERIFY_RUNTIME:+RUNTIME=$VERIFY_RUNTIME}
SANDBOX_IDLE_TIMEOUT=600
PLANACT_PORT=127.0.0.1:$app_port
PLANACT_PORT_2=127.0.0.1:$app_port_2
PROMETHEUS_PORT=127.0.0.1:$prometheus_port
METRICS_TOKEN=$(python3 -c 'import secrets; print(secrets.token_hex(16))')
PLANACT_IMAGE=${VERIFY_IMAGE:-planact:latest}
SANDBOX_IMAGE=planact-sandbox:verify
BASE_IMAGE=$BASE_IMAGE
${gateway:+PLANACT_HOST_GATEWAY=$gateway}
${PLANACT_CI_SUBNET:+PLANACT_CI_SUBNET=$PLANACT_CI_SUBNET}
EOF
# a TLS-intercepting proxy's CA (as on CI machines) for the builds' package downloads
if [ -z "${EXTRA_CA_CERTS:-}" ] && ls /usr/local/share/ca-certificates/*.crt >/dev/null 2>&1; then
  EXTRA_CA_CERTS=$(cat /usr/local/share/ca-certificates/*.crt)
  export EXTRA_CA_CERTS
fi

compose_args=(--env-file "$tmp/verify.env" -p "$project" -f docker-compose.yml)
[ -n "$override" ] && compose_args+=(-f "$override")
# a clean environment: only verify.env feeds the interpolation, whatever the shell exports
clean_env=(env -i "PATH=$PATH" "HOME=$HOME" "EXTRA_CA_CERTS=${EXTRA_CA_CERTS:-}")
for var in DOCKER_HOST DOCKER_CONFIG DOCKER_CONTEXT DOCKER_CERT_PATH DOCKER_TLS_VERIFY; do
  [ -n "${!var:-}" ] && clean_env+=("$var=${!var}")
done
compose() { "${clean_env[@]}" docker compose "${compose_args[@]}" "$@"; }
# leftovers of an interrupted earlier run
remove_sandboxes
compose --profile postgres --profile scaled down -v --remove-orphans >/dev/null 2>&1 || true
url=http://127.0.0.1:$app_port

# without AUTH_TOKEN Compose refuses to start, saying what to set
grep -v '^AUTH_TOKEN=' "$tmp/verify.env" >"$tmp/no-token.env"
if "${clean_env[@]}" docker compose --env-file "$tmp/no-token.env" -p "$project" \
    -f docker-compose.yml config -q >"$tmp/no-token.log" 2>&1; then
  die "docker compose accepted a configuration without AUTH_TOKEN"
fi
grep -q "AUTH_TOKEN is not set" "$tmp/no-token.log" || { cat "$tmp/no-token.log" >&2; die "unclear refusal"; }
say "  ok   without AUTH_TOKEN: $(head -c 200 "$tmp/no-token.log")"
report=()
figure() { report+=("$*"); say "figure: $*"; }

wait_healthy() {  # $1: label; prints seconds to /api/health ok and to docker's "healthy"
  local t0=$1 secs cid status
  secs=$(python3 scripts/compose/smoke.py wait --url "$url" --timeout "$wait_s") \
    || die "the app did not become healthy"
  cid=$(compose ps -q app)
  for _ in $(seq 1 $((wait_s * 5))); do
    status=$(docker inspect -f '{{.State.Health.Status}}' "$cid")
    [ "$status" = healthy ] && break
    sleep 0.2
  done
  [ "$status" = healthy ] || die "docker reports the app container $status"
  echo "$secs $(python3 -c "import time; print(f'{time.time() - $t0:.1f}')")"
}

build_images() {  # $@: compose arguments
  local t0
  t0=$(date +%s)
  say "building images: docker compose $*"
  compose "$@" >"$tmp/build.log" 2>&1 || { tail -40 "$tmp/build.log" >&2; die "build failed"; }
  say "images built in $(( $(date +%s) - t0 ))s"
}

run_pass() {  # $1: sqlite | postgres
  local pass=$1 profile=() t0 times cid sandboxes n
  if [ "$pass" = postgres ]; then
    profile=(--profile postgres)
    cat >>"$tmp/verify.env" <<EOF
DATABASE_URL=postgresql+psycopg://planact:planact@postgres:5432/planact
EOF
  fi
  if [ "$pass" = scaled ]; then
    profile=(--profile scaled)
    cat >>"$tmp/verify.env" <<EOF
DATABASE_URL=postgresql+psycopg://planact:planact@postgres:5432/planact
EXECUTOR=queue
EOF
  fi
  say "=== pass $pass"
  # every image through Compose, the sandbox under a tag of its own (planact-sandbox:verify)
  # so that the one `make sandbox-image` keeps up to date is left alone
  build_images "${profile[@]}" build

  t0=$(python3 -c 'import time; print(time.time())')
  compose "${profile[@]}" up -d >"$tmp/up.log" 2>&1 || { cat "$tmp/up.log" >&2; die "docker compose up failed"; }
  times=$(wait_healthy "$t0")
  figure "$pass: up -d -> /api/health ok ${times% *}s, -> docker healthy ${times#* }s"
  curl -fsS "$url/" >"$tmp/index.html" || die "GET / failed"
  if ! grep -q '<script' "$tmp/index.html" || grep -q "web UI is not built" "$tmp/index.html"; then
    die "GET / does not serve the built web client: $(head -c 300 "$tmp/index.html")"
  fi
  say "  ok   GET / serves the web client"

  if [ "$pass" != sqlite ]; then
    compose "${profile[@]}" exec -T postgres psql -U planact -d planact -Atc \
      'select version_num from alembic_version' >"$tmp/pg.txt" 2>&1 \
      || { cat "$tmp/pg.txt" >&2; die "the app did not migrate the PostgreSQL database"; }
    say "  ok   PostgreSQL holds the schema (alembic revision $(cat "$tmp/pg.txt"))"
  fi
  say "a run against the fake model (runtime $runtime${by_default:+, the app image default})"
  cid=$(python3 scripts/compose/smoke.py run --url "$url" --token "$token" \
        --fake-url "http://127.0.0.1:$fake_port" --runtime "$runtime" "${by_default[@]}" \
        --timeout "$wait_s") \
    || die "the run check failed"
  if [ "$runtime" = docker ]; then
    # the sandbox of this conversation: its only mount is the conversation's own folder
    sandboxes=$(for id in $(docker ps -aq --filter label=planact.sandbox); do
        docker inspect -f '{{len .Mounts}} {{range .Mounts}}{{.Type}} {{.Source}} {{.Destination}}{{end}}' "$id"
      done | grep "/volumes/${project}_workspace/" || true)
    [ -n "$sandboxes" ] || die "no sandbox container of this project was started"
    [ "$(echo "$sandboxes" | wc -l)" = 1 ] || die "more than one sandbox for one conversation: $sandboxes"
    case "$sandboxes" in
      "1 bind "*"/${project}_workspace/_data/user_"*"/Conversation_$cid /workspace") ;;
      *) die "the sandbox mounts more or other than its conversation folder: $sandboxes" ;;
    esac
    say "  ok   a sandbox container (sibling of the app) ran the command, mounting only ${sandboxes#1 bind }"
  fi
  if [ "$pass" = scaled ]; then
    # a worker ran it, and the other API replica serves the same conversation
    python3 scripts/compose/smoke.py scaled --url "$url" --url2 "http://127.0.0.1:$app_port_2" \
      --token "$token" --conversation "$cid" --timeout "$wait_s" || die "the scaled check failed"
    n=$(compose "${profile[@]}" ps -q worker | wc -l)
    [ "$n" = 2 ] || die "expected 2 worker containers, found $n"
    say "  ok   2 worker containers"
    # Prometheus scraped the replicas and the workers: its query API counts the run
    python3 scripts/compose/smoke.py prometheus --url "http://127.0.0.1:$prometheus_port" \
      --timeout "$wait_s" || die "Prometheus does not count the run"
  fi

  say "down (volumes kept) and up again"
  remove_sandboxes
  compose "${profile[@]}" down >/dev/null 2>&1 || die "docker compose down failed"
  t0=$(python3 -c 'import time; print(time.time())')
  compose "${profile[@]}" up -d >"$tmp/up.log" 2>&1 || { cat "$tmp/up.log" >&2; die "docker compose up failed"; }
  times=$(wait_healthy "$t0")
  figure "$pass: recreated container -> /api/health ok ${times% *}s"
  python3 scripts/compose/smoke.py check --url "$url" --token "$token" --conversation "$cid" \
    || die "the conversation did not survive down + up"
  if [ "$pass" != sqlite ]; then
    n=$(compose "${profile[@]}" exec -T postgres psql -U planact -d planact -Atc \
      "select count(*) from conversations where id = '$cid'" 2>/dev/null || true)
    [ "$n" = 1 ] || die "conversation $cid is not in PostgreSQL (got '$n')"
    say "  ok   the conversation is stored in PostgreSQL"
  fi

  say "stop and start"
  compose "${profile[@]}" stop >/dev/null 2>&1
  compose "${profile[@]}" start >/dev/null 2>&1
  wait_healthy "$(python3 -c 'import time; print(time.time())')" >/dev/null
  python3 scripts/compose/smoke.py check --url "$url" --token "$token" --conversation "$cid" \
    || die "the conversation did not survive stop + start"

  remove_sandboxes
  compose "${profile[@]}" down -v >/dev/null 2>&1 || die "docker compose down -v failed"
  say "pass $pass: ok"
}

for pass in $passes; do
  run_pass "$pass"
done

for img in planact:latest planact-sandbox:verify planact-postgres:15 planact-prometheus:local; do
  docker image inspect "$img" >/dev/null 2>&1 || continue
  figure "image $img: $(docker image inspect -f '{{.Size}}' "$img" | awk '{printf "%.0f MB", $1/1e6}')"
done
if [ -n "${VERIFY_REPORT:-}" ]; then
  printf -- '- %s\n' "${report[@]}" >>"$VERIFY_REPORT"
fi
say "all passes ok: $passes"
