#!/usr/bin/env bash
# ResolveWeightPath QPS with the fleet registry on versus off, in one run.
# Loads DEVICES devices into a fresh SQLite registry with bench_store, starts
# two weightpath-servers on loopback (A: --store=sqlite:<that file>, B:
# --store=none), and runs bench_fleet_resolve against them alternately
# (A B A B ...). Prints each server's RSS afterwards. Deletes everything.
#   usage: bench/fleet_run.sh [BUILD_DIR] [DEVICES] [ROUNDS] [ROUND_TIME] [CONCURRENCY]
#   env: REGISTRY=FILE copies that registry (a bench_store --devices=DEVICES
#        load kept from an earlier run) instead of loading a new one.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
devices=${2:-1000000}
rounds=${3:-3}
round_time=${4:-5s}
concurrency=${5:-8}
for binary in server/weightpath-server bench/bench_store bench/bench_fleet_resolve; do
  [[ -x "$build/$binary" ]] || {
    echo "build it first: cmake --build $build --target weightpath-server bench_store bench_fleet_resolve" >&2
    exit 2
  }
done

work=$(mktemp -d /tmp/wp-fleet-bench-XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

echo "machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p'), load: $(cut -d' ' -f1-3 /proc/loadavg)"
if [[ -n "${REGISTRY:-}" ]]; then
  echo "== copying the registry $REGISTRY ($devices devices)"
  cp "$REGISTRY" "$work/fleet.db"
else
  echo "== loading $devices devices into $work/fleet.db"
  "$build/bench/bench_store" --store="sqlite:$work/fleet.db" --devices="$devices" \
    --measurements=1 --threads=1 | grep -iE "devices|size|upsert" || true
fi

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
start_server on --store="sqlite:$work/fleet.db"
start_server off --store=none
on_address=$(sed -n 's/^listening grpc=\([^ ]*\) .*/\1/p' "$work/on.out")
off_address=$(sed -n 's/^listening grpc=\([^ ]*\) .*/\1/p' "$work/off.out")

echo "== ResolveWeightPath, $concurrency client threads, $rounds x $round_time rounds each, alternating"
"$build/bench/bench_fleet_resolve" --on="$on_address" --off="$off_address" --rounds="$rounds" \
  --round_time="$round_time" --concurrency="$concurrency" --devices="$devices"

echo "== server RSS after the run"
echo "registry-on:  $(grep VmRSS /proc/${pids[0]}/status | tr -s ' ')"
echo "registry-off: $(grep VmRSS /proc/${pids[1]}/status | tr -s ' ')"
on_metrics=$(sed -n 's/^listening grpc=[^ ]* metrics=\(.*\)$/\1/p' "$work/on.out")
curl -s "http://$on_metrics/metrics" | grep -E '^weightpath_fleet_records_(dropped|flushed)_total' || true
