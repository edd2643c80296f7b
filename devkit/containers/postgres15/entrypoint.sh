#!/bin/sh
# First start: a cluster with POSTGRES_USER (default postgres) as superuser, POSTGRES_PASSWORD
# (none: trust) for connections from outside the container, and POSTGRES_DB (default the user).
set -eu
user=${POSTGRES_USER:-postgres}
db=${POSTGRES_DB:-$user}
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  pwfile=$(mktemp)
  printf '%s\n' "${POSTGRES_PASSWORD:-}" >"$pwfile"
  method=trust
  if [ -n "${POSTGRES_PASSWORD:-}" ]; then method=scram-sha-256; fi
  initdb -D "$PGDATA" -U "$user" --pwfile="$pwfile" -E UTF8 --locale=C.UTF-8 \
    --auth-local=trust --auth-host="$method" >/dev/null
  rm -f "$pwfile"
  printf 'host all all 0.0.0.0/0 %s\nhost all all ::/0 %s\n' "$method" "$method" >>"$PGDATA/pg_hba.conf"
  if [ "$db" != postgres ]; then
    echo "CREATE DATABASE \"$db\"" | postgres --single -D "$PGDATA" postgres >/dev/null
  fi
fi
if [ "${1:-}" = postgres ]; then
  shift
  exec postgres -D "$PGDATA" -c listen_addresses='*' -c max_connections=200 "$@"
fi
exec "$@"
