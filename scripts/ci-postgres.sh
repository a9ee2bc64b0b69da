#!/usr/bin/env bash
# Start a throwaway PostgreSQL server for the PostgreSQL storage test. Installs nothing: it needs
# Debian's `postgresql` package (initdb and pg_ctl under /usr/lib/postgresql/<version>/bin).
#
#   eval "$(scripts/ci-postgres.sh)"       # start; exports NOTARIUS_TEST_PG_URL and _PG_DIR
#   scripts/ci-postgres.sh stop             # stop it and delete its folder (uses _PG_DIR)
#
# The cluster lives in a fresh temporary folder, listens on 127.0.0.1 only, on a free port, with
# its Unix socket in that folder, so it never touches a system cluster or port 5432. Run as root
# (CI), the server runs as the `postgres` user (initdb refuses root); otherwise as the caller.
# Only the `export` lines go to stdout; progress and errors go to stderr.
set -euo pipefail

log() { echo "ci-postgres: $*" >&2; }
die() { log "error: $*"; exit 1; }

pg_bin() {
  local dir
  for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    if [[ -x "$dir/initdb" && -x "$dir/pg_ctl" ]]; then echo "$dir"; return 0; fi
  done
  command -v initdb >/dev/null && dirname "$(command -v initdb)" && return 0
  die "PostgreSQL server binaries not found; install the Debian package: apt-get install -y postgresql"
}

# Run a command as the cluster owner: `postgres` when we are root, else ourselves.
as_owner() {
  if [[ $EUID -eq 0 ]]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

free_port() {
  python3 - <<'PY'
import socket
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    print(s.getsockname()[1])
PY
}

stop() {
  local dir="${NOTARIUS_TEST_PG_DIR:-${1:-}}"
  [[ -n "$dir" && -f "$dir/data/PG_VERSION" ]] || die "no cluster to stop (set NOTARIUS_TEST_PG_DIR or pass the folder)"
  local bin; bin="$(pg_bin)"
  as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >&2 || log "server was not running"
  rm -rf "$dir"
  log "stopped and removed $dir"
}

start() {
  local bin dir port password
  bin="$(pg_bin)"
  if [[ $EUID -eq 0 ]]; then
    getent passwd postgres >/dev/null || die "running as root needs the 'postgres' user (created by the Debian package)"
  fi
  dir="$(mktemp -d "${TMPDIR:-/tmp}/notarius-pg.XXXXXX")"
  chmod 755 "$dir"
  [[ $EUID -eq 0 ]] && chown postgres: "$dir"
  port="$(free_port)"
  password="$(python3 -c 'import secrets; print(secrets.token_hex(16))')"

  log "initdb in $dir/data ($("$bin/postgres" --version))"
  as_owner "$bin/initdb" -D "$dir/data" -U postgres --auth-local=trust --auth-host=scram-sha-256 \
    --encoding=UTF8 --no-instructions >"$dir/initdb.log" 2>&1 \
    || { cat "$dir/initdb.log" >&2; die "initdb failed"; }
  log "starting on 127.0.0.1:$port"
  as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off" start >&2 \
    || { cat "$dir/server.log" >&2; die "the server did not start"; }

  as_owner "$bin/psql" -X -q -v ON_ERROR_STOP=1 -h "$dir" -p "$port" -U postgres -d postgres >&2 <<SQL
CREATE ROLE notarius LOGIN PASSWORD '$password';
CREATE DATABASE notarius_test OWNER notarius;
SQL
  log "database notarius_test ready (user notarius); stop with: scripts/ci-postgres.sh stop"
  # `+psycopg2`: dagster-postgres ships psycopg2, and SQLAlchemy 2.1 maps a bare
  # `postgresql://` to psycopg 3, which is not installed.
  echo "export NOTARIUS_TEST_PG_URL=postgresql+psycopg2://notarius:$password@127.0.0.1:$port/notarius_test"
  echo "export NOTARIUS_TEST_PG_DIR=$dir"
}

case "${1:-start}" in
  start) start ;;
  stop) shift; stop "${1:-}" ;;
  *) die "usage: $0 [start|stop [FOLDER]]" ;;
esac
