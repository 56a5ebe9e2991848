#!/usr/bin/env bash
# Runs bench_store against a fresh SQLite file and a throwaway PostgreSQL 15
# (default settings: fsync on, synchronous_commit on) on 127.0.0.1, then
# stops PostgreSQL and deletes everything.
#   usage: bench/store_run.sh [BUILD_DIR] [DEVICES] [MEASUREMENTS]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
devices=${2:-1000000}
measurements=${3:-2000}
bench="$PWD/$build/bench/bench_store"
pgbin=/usr/lib/postgresql/15/bin
[[ -x "$bench" ]] || { echo "build bench_store first: cmake --build $build --target bench_store" >&2; exit 2; }

work=$(mktemp -d /tmp/wp-store-bench-XXXXXX)
as_postgres() { if [[ $(id -u) -eq 0 ]]; then su postgres -s /bin/sh -c "$1"; else sh -c "$1"; fi; }
cleanup() {
  as_postgres "$pgbin/pg_ctl -D $work/pg -m fast -w stop" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
[[ $(id -u) -eq 0 ]] && chown postgres "$work"

echo "machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p'), load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== sqlite"
"$bench" --store="sqlite:$work/fleet.db" --devices="$devices" --measurements="$measurements" --threads=1,4

echo "== postgres"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
as_postgres "$pgbin/initdb -D $work/pg -A trust -U postgres -E UTF8 --locale=C >$work/initdb.log 2>&1"
as_postgres "$pgbin/pg_ctl -D $work/pg -o \"-k $work -p $port -c listen_addresses=127.0.0.1\" -l $work/pg.log -w start" >/dev/null
as_postgres "$pgbin/createdb -h 127.0.0.1 -p $port -U postgres bench"
"$bench" --store="postgres://postgres@127.0.0.1:$port/bench" --devices="$devices" --measurements="$measurements" --threads=1,4
