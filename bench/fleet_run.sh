#!/usr/bin/env bash
# ResolveWeightPath QPS with the fleet registry on versus off, in one run.
# Registers DEVICES devices the way a fleet does, each resolving once through
# a weightpath-server with a fresh SQLite registry (then stopped, which
# flushes it); starts two weightpath-servers on loopback (A: --store=sqlite:
# <that file>, B: --store=none), and runs bench_fleet_resolve against them
# alternately (A B A B ...), devices drawn at random from the registered
# ones. Prints each server's RSS afterwards. Deletes everything.
#   usage: bench/fleet_run.sh [BUILD_DIR] [DEVICES] [ROUNDS] [ROUND_TIME] [CONCURRENCY]
#   CONCURRENCY: client threads, or a comma-separated list run one after the
#   other against the same two servers (e.g. 8,32,64).
#   env: BACKEND=postgres keeps the registry in a throwaway PostgreSQL 15
#        (default settings: fsync and synchronous_commit on) started on
#        127.0.0.1, instead of a SQLite file.
#        REGISTRY=FILE (SQLite only) copies that registry (kept from an earlier run with
#        KEEP=FILE) instead of registering the devices again.
#        REGISTER_CONCURRENCY (default 4): client threads while registering;
#        few enough that no record is dropped. REGISTER_FLAGS, ON_FLAGS:
#        extra server flags for the registering server and server A.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
devices=${2:-1000000}
rounds=${3:-3}
round_time=${4:-5s}
concurrency=${5:-8}
for binary in server/weightpath-server bench/bench_fleet_resolve; do
  [[ -x "$build/$binary" ]] || {
    echo "build it first: cmake --build $build --target weightpath-server bench_fleet_resolve" >&2
    exit 2
  }
done

backend=${BACKEND:-sqlite}
[[ $backend == sqlite || $backend == postgres ]] || { echo "BACKEND must be sqlite or postgres" >&2; exit 2; }
pgbin=/usr/lib/postgresql/15/bin
as_postgres() { if [[ $(id -u) -eq 0 ]]; then su postgres -s /bin/sh -c "$1"; else sh -c "$1"; fi; }

work=$(mktemp -d /tmp/wp-fleet-bench-XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [[ $backend == postgres ]]; then
    as_postgres "$pgbin/pg_ctl -D $work/pg -m fast -w stop" >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
if [[ $backend == postgres ]]; then
  [[ $(id -u) -eq 0 ]] && chown postgres "$work"
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  as_postgres "$pgbin/initdb -D $work/pg -A trust -U postgres -E UTF8 --locale=C >$work/initdb.log 2>&1"
  as_postgres "$pgbin/pg_ctl -D $work/pg -o \"-k $work -p $port -c listen_addresses=127.0.0.1\" -l $work/pg.log -w start" >/dev/null
  as_postgres "$pgbin/createdb -h 127.0.0.1 -p $port -U postgres fleet"
  store="postgres://postgres@127.0.0.1:$port/fleet"
else
  store="sqlite:$work/fleet.db"
fi

echo "machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p'), load: $(cut -d' ' -f1-3 /proc/loadavg)"
start_server() {  # name, extra flags...
  local name=$1
  shift
  "$build/server/weightpath-server" --listen=127.0.0.1:0 --metrics_listen=127.0.0.1:0 \
    --log_level=warn "$@" >"$work/$name.out" 2>"$work/$name.log" &
  pids+=($!)
  for _ in $(seq 1 300); do
    grep -q '^listening' "$work/$name.out" && return 0
    sleep 0.1
  done
  echo "$name did not start:" >&2
  cat "$work/$name.log" >&2
  exit 1
}
address_of() { sed -n 's/^listening grpc=\([^ ]*\) .*/\1/p' "$work/$1.out"; }
metrics_of() { sed -n 's/^listening grpc=[^ ]* metrics=\(.*\)$/\1/p' "$work/$1.out"; }

if [[ -n "${REGISTRY:-}" && $backend == sqlite ]]; then
  echo "== copying the registry $REGISTRY ($devices devices)"
  cp "$REGISTRY" "$work/fleet.db"
else
  echo "== registering $devices devices: each resolves once through a server writing $store"
  start_server register --store="$store" --log_level=info ${REGISTER_FLAGS:-}
  "$build/bench/bench_fleet_resolve" --register --on="$(address_of register)" \
    --devices="$devices" --concurrency="${REGISTER_CONCURRENCY:-4}"
  stop_started=$(date +%s.%N)
  kill -TERM "${pids[0]}"  # writes what is still queued
  wait "${pids[0]}" || true
  echo "registering server stopped in $(python3 -c "print(round($(date +%s.%N) - $stop_started, 1))") s"
  pids=()
  grep -h "device registry flushed" "$work/register.log" || true
  if [[ $backend == postgres ]]; then
    echo "registry in PostgreSQL: $(as_postgres "$pgbin/psql -h 127.0.0.1 -p $port -U postgres -d fleet -At -c \"SELECT pg_size_pretty(pg_database_size('fleet'))\"")"
  else
    echo "registry on disk: $(du -m "$work"/fleet.db* | awk '{s += $1} END {print s}') MiB"
    if [[ -n "${KEEP:-}" ]]; then cp "$work/fleet.db" "$KEEP" && echo "kept as $KEEP"; fi
  fi
fi

start_server on --store="$store" ${ON_FLAGS:-}
start_server off --store=none
on_address=$(address_of on)
off_address=$(address_of off)

for threads in ${concurrency//,/ }; do
  echo "== ResolveWeightPath, $threads client threads, $rounds x $round_time rounds each, alternating"
  "$build/bench/bench_fleet_resolve" --on="$on_address" --off="$off_address" --rounds="$rounds" \
    --round_time="$round_time" --concurrency="$threads" --devices="$devices"
done

sleep 6  # a flush and a metrics refresh (every 5 s) after the last round
echo "== server RSS after the run"
echo "registry-on:  $(grep VmRSS /proc/${pids[0]}/status | tr -s ' ')"
echo "registry-off: $(grep VmRSS /proc/${pids[1]}/status | tr -s ' ')"
curl -s "http://$(metrics_of on)/metrics" | grep -E '^weightpath_fleet_records_(dropped|flushed)_total' || true
