#!/usr/bin/env bash
# CI: a PostgreSQL server on loopback for the store/e2e tests that run against PostgreSQL.
# Installs Debian's postgresql when missing, starts the default cluster, creates the test
# role and database, and exports TEST_POSTGRES_URL + REQUIRE_POSTGRES=1 for `make test`.
set -euo pipefail
say() { echo "10-postgres.sh: $*" >&2; }

if ! command -v pg_lsclusters >/dev/null 2>&1 || [ -z "$(ls /usr/lib/postgresql 2>/dev/null)" ]; then
  say "installing postgresql"
  apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >/dev/null
fi
version=$(ls /usr/lib/postgresql | sort -n | tail -1)
if ! pg_lsclusters -h | awk -v v="$version" '$1==v && $2=="main"' | grep -q .; then
  pg_createcluster "$version" main >/dev/null
fi
if ! pg_lsclusters -h | awk -v v="$version" '$1==v && $2=="main" && $4=="online"' | grep -q .; then
  say "starting cluster $version/main"
  pg_ctlcluster "$version" main start
fi
port=$(pg_lsclusters -h | awk -v v="$version" '$1==v && $2=="main" {print $3}')
for _ in $(seq 1 60); do
  su postgres -c "psql -p $port -tAc 'select 1'" >/dev/null 2>&1 && break
  sleep 0.5
done
su postgres -c "psql -p $port -v ON_ERROR_STOP=1" >/dev/null <<SQL
DO \$\$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'planact') THEN
    CREATE ROLE planact LOGIN PASSWORD 'planact' CREATEDB;
  END IF;
END \$\$;
SQL
su postgres -c "psql -p $port -tAc \"select 1 from pg_database where datname='planact_test'\"" | grep -q 1 \
  || su postgres -c "createdb -p $port -O planact planact_test"
url="postgresql+psycopg://planact:planact@127.0.0.1:${port}/planact_test"
say "PostgreSQL ready at $url"
if [ -n "${CI_ENV_FILE:-}" ]; then
  printf 'TEST_POSTGRES_URL=%s\nREQUIRE_POSTGRES=1\n' "$url" >> "$CI_ENV_FILE"
fi
