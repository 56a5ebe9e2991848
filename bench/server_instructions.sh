#!/usr/bin/env bash
# User-space instructions per call, counted by callgrind in the server
# process: weightpath-server against the gRPC floor (bench/grpc_floor_server.cc,
# the same request and response bytes and no work) and against health, for
# the full answer and for the "unchanged" answer to a device that sends the
# etag of the decision it holds. Instruction counts do not drift with the
# machine's load the way QPS does, so this is the repeatable half of the
# server figures (bench/server_load.sh is the other).
#
#   bench/server_instructions.sh SERVER_BINARY BODY_TOOL FLOOR_SERVER [PROFILE.json...]
#   env: CALLS (default 4000), WARMUP_CALLS (default 500), SERVER_B_BINARY (another
#   build, e.g. the commit before a change, counted in the same run against the
#   same floor: the resolve_b and flr/b columns), SERVER_FLAGS (more flags for both servers,
#   e.g. --catalog=tests/data/single_file_catalog.yaml: the request is a single-file agent's,
#   and the embedded demo catalog's directory builds are refused to it)
set -euo pipefail

server_bin=$1
body_tool=$2
floor_bin=$3
shift 3
here=$(cd "$(dirname "$0")" && pwd)
profiles=("$@")
((${#profiles[@]})) || profiles=("$here/profiles/agent-probe-epyc-vm.json"
                                 "$here/../examples/profiles/intel-sapphire-rapids.json")
calls=${CALLS:-4000}
warmup=${WARMUP_CALLS:-500}

work=$(mktemp -d)
pid=
cleanup() {
  [[ -n "$pid" ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

# count NAME BODY URL_PATH COMMAND... -> instructions per call
count() {
  local name=$1 body=$2 path=$3
  shift 3
  rm -f "$work"/cg.* "$work/$name.out"
  valgrind --tool=callgrind --dump-instr=no --callgrind-out-file="$work/cg.%p" "$@" \
    >"$work/$name.out" 2>"$work/$name.log" &
  pid=$!
  for _ in $(seq 600); do grep -q '^listening ' "$work/$name.out" 2>/dev/null && break; sleep 0.1; done
  local address
  address=$(sed -n 's/^listening grpc=\([^ ]*\).*/\1/p' "$work/$name.out")
  [[ -n "$address" ]] || { cat "$work/$name.log" >&2; exit 1; }
  local h2=(h2load -c 4 -m 16 -H 'content-type: application/grpc' -H 'te: trailers' -d "$body")
  "${h2[@]}" -n "$warmup" "http://$address$path" >/dev/null
  callgrind_control -z "$pid" >/dev/null
  "${h2[@]}" -n "$calls" "http://$address$path" | grep -q "$calls succeeded" ||
    { echo "$name: not every call succeeded" >&2; exit 1; }
  callgrind_control -d "$pid" >/dev/null
  kill "$pid"; wait "$pid" 2>/dev/null || true
  pid=
  local dump
  dump=$(ls "$work"/cg.*.1 2>/dev/null | head -n 1)
  awk -v calls="$calls" '/^(summary|totals):/ { total = $2 } END { printf "%.0f\n", total / calls }' "$dump"
}

server_b=${SERVER_B_BINARY:-}
if [[ -n "$server_b" ]]; then
  printf "%-40s %-10s %12s %12s %12s %12s %8s %8s %8s\n" profile answer resolve resolve_b floor health \
    "res/flr" "flr/res" "flr/b"
else
  printf "%-40s %-10s %12s %12s %12s %8s %8s\n" profile answer resolve floor health "res/flr" "flr/res"
fi
for profile in "${profiles[@]}"; do
  for answer in full unchanged; do
    etag=() floor_flag=() server_flags=(--listen=127.0.0.1:0 --metrics_listen=127.0.0.1:0 --reload_interval=0s --store=none)
    # shellcheck disable=SC2206 # flags are whitespace-separated on purpose
    server_flags+=(${SERVER_FLAGS:-})
    if [[ $answer == unchanged ]]; then etag=(--known-etag); floor_flag=(--unchanged); fi
    "$body_tool" "$profile" "$work/resolve.bin" "$work/health.bin" "${etag[@]}" >/dev/null
    resolve=$(count resolve "$work/resolve.bin" /weightpath.v1.WeightPath/ResolveWeightPath \
      "$server_bin" "${server_flags[@]}")
    floor=$(count floor "$work/resolve.bin" /weightpath.v1.WeightPath/ResolveWeightPath \
      "$floor_bin" "$profile" 127.0.0.1:0 "${floor_flag[@]}")
    health=$(count health "$work/health.bin" /grpc.health.v1.Health/Check \
      "$server_bin" "${server_flags[@]}")
    if [[ -n "$server_b" ]]; then
      resolve_b=$(count resolve_b "$work/resolve.bin" /weightpath.v1.WeightPath/ResolveWeightPath \
        "$server_b" "${server_flags[@]}")
      printf "%-40s %-10s %12s %12s %12s %12s %8.3f %8.3f %8.3f\n" "$(basename "$profile")" \
        "$answer" "$resolve" "$resolve_b" "$floor" "$health" \
        "$(awk "BEGIN {print $resolve / $floor}")" "$(awk "BEGIN {print $floor / $resolve}")" \
        "$(awk "BEGIN {print $floor / $resolve_b}")"
    else
      printf "%-40s %-10s %12s %12s %12s %8.3f %8.3f\n" "$(basename "$profile")" "$answer" \
        "$resolve" "$floor" "$health" "$(awk "BEGIN {print $resolve / $floor}")" \
        "$(awk "BEGIN {print $floor / $resolve}")"
    fi
  done
done
