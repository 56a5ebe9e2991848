#!/usr/bin/env bash
# Load benchmark of weightpath-server: h2load drives ResolveWeightPath and
# grpc.health.v1.Health/Check on the same server in the same run, A B A B at
# each concurrency, and reports QPS, p50/p99 and the resolve/health ratio,
# plus the server's idle and loaded RSS. In the same rounds it drives the
# gRPC floor (bench/grpc_floor_server.cc: the same request and response
# bytes, no work) so the cost of the message sizes themselves shows apart
# from what weightpath adds (the resolve/floor ratio).
#
#   bench/server_load.sh SERVER_BINARY BODY_TOOL FLOOR_SERVER [PROFILE.json]
#   env: DURATION (s per run, default 10), WARMUP (s, default 2),
#        INFLIGHT ("1 16 64"), ROUNDS (per level, default 2), H2LOAD_THREADS (default 1),
#        SERVER_ARGS (default --store=none),
#        SERVER_B_BINARY: the B arm runs this binary instead (a before/after
#        A/B in one run; set SERVER_B_ENV too, e.g. "B=1", to start it),
#        SERVER_B_ENV (e.g. "WEIGHTPATH_REQUEST_DECODER=protobuf"): also start a
#        second server, the B arm, with these environment variables, and drive
#        it as "resolve_b" in every round next to "resolve" (A first in odd
#        rounds, B first in even ones), for an A/B in one run on a machine
#        whose speed drifts between runs. SERVER_A_ENV does the same for the
#        A server (to swap the arms, or to run both the same: a null A/B).
#        KNOWN_ETAG=1: the request carries the etag of the decision it gets,
#        as an agent re-resolving the decision it holds does; the server
#        answers "unchanged", the floor sends those same bytes, and every
#        resolve run is checked to have been answered "unchanged".
#
# h2load counts HTTP 200 even for gRPC errors, so every resolve run is
# checked against the server's own counters: all calls must be code OK.
set -euo pipefail

server_bin=$1
body_tool=$2
floor_bin=$3
here=$(cd "$(dirname "$0")" && pwd)
profile=${4:-$here/../examples/profiles/intel-sapphire-rapids.json}
duration=${DURATION:-10}
warmup=${WARMUP:-2}
inflight_levels=${INFLIGHT:-1 16 64}
threads=${H2LOAD_THREADS:-1}
rounds=${ROUNDS:-2}

arm_b_env=${SERVER_B_ENV:-}

work=$(mktemp -d)
server_pid=
server_b_pid=
floor_pid=
cleanup() {
  local pid
  for pid in "$server_pid" "$server_b_pid" "$floor_pid"; do
    [[ -n "$pid" ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  done
  rm -rf "$work"
}
trap cleanup EXIT

etag_args=()
[[ ${KNOWN_ETAG:-0} == 1 ]] && etag_args=(--known-etag)
"$body_tool" "$profile" "$work/resolve.bin" "$work/health.bin" "${etag_args[@]}" >&2

# start_server NAME [ENV=VALUE...]: sets NAME_pid, NAME_grpc, NAME_metrics.
start_server() {
  local name=$1
  shift
  local binary=$server_bin
  [[ $name == server_b ]] && binary=${SERVER_B_BINARY:-$server_bin}
  # The fleet registry is measured on its own (bench/fleet_run.sh); here it
  # is off so the figure is the resolve path itself, and no database file
  # is left.
  env "$@" "$binary" --listen=127.0.0.1:0 --metrics_listen=127.0.0.1:0 --reload_interval=0s \
    ${SERVER_ARGS:---store=none} \
    >"$work/$name.out" 2>"$work/$name.log" &
  printf -v "${name}_pid" '%s' "$!"
  for _ in $(seq 300); do grep -q '^listening ' "$work/$name.out" 2>/dev/null && break; sleep 0.1; done
  printf -v "${name}_grpc" '%s' "$(sed -n 's/^listening grpc=\([^ ]*\) .*/\1/p' "$work/$name.out")"
  printf -v "${name}_metrics" '%s' "$(sed -n 's/.* metrics=\([^ ]*\)$/\1/p' "$work/$name.out")"
  local address_var=${name}_grpc
  [[ -n "${!address_var}" ]] || { cat "$work/$name.log" >&2; exit 1; }
}
# shellcheck disable=SC2086  # "A=1 B=2": one word per variable
start_server server ${SERVER_A_ENV:-}
grpc_addr=$server_grpc
services="resolve floor health"
if [[ -n "$arm_b_env" ]]; then
  # shellcheck disable=SC2086  # "A=1 B=2": one word per variable
  start_server server_b $arm_b_env
  services="resolve resolve_b floor health"
  echo "A/B: resolve = $server_bin with [${SERVER_A_ENV:-}], resolve_b = ${SERVER_B_BINARY:-the same binary} with [$arm_b_env]" >&2
fi
floor_args=()
[[ ${KNOWN_ETAG:-0} == 1 ]] && floor_args=(--unchanged)
"$floor_bin" "$profile" 127.0.0.1:0 "${floor_args[@]}" >"$work/floor.out" 2>"$work/floor.log" &
floor_pid=$!
for _ in $(seq 300); do grep -q '^listening ' "$work/floor.out" 2>/dev/null && break; sleep 0.1; done
floor_addr=$(sed -n 's/^listening grpc=\([^ ]*\)$/\1/p' "$work/floor.out")
[[ -n "$floor_addr" ]] || { cat "$work/floor.log" >&2; exit 1; }

# The floor is only a floor if it receives and sends what the server does:
# one call to each with the request body, and every answer must be the
# same bytes (h2load's per-call DATA count includes its warm-up, so it
# cannot tell).
answer_addresses=("$server_grpc" "$floor_addr")
[[ -n "$arm_b_env" ]] && answer_addresses+=("$server_b_grpc")
/usr/bin/python3 - "$work/resolve.bin" "${answer_addresses[@]}" <<'PY' || exit 1
import sys, grpc
body = open(sys.argv[1], "rb").read()[5:]  # without the gRPC message prefix
answers = {}
for address in sys.argv[2:]:
    with grpc.insecure_channel(address) as channel:
        answers[address] = channel.unary_unary("/weightpath.v1.WeightPath/ResolveWeightPath")(body, timeout=10)
first = sys.argv[2]
for address, answer in answers.items():
    if answer != answers[first]:
        sys.exit(f"{address} answered {len(answer)} bytes, {first} {len(answers[first])}: not the same bytes")
print(f"every server answers the same {len(answers[first])} bytes to the {len(body)}-byte request", file=sys.stderr)
PY
rss_kib() { awk -v k="$1:" '$1 == k {print $2}' "/proc/$server_pid/status"; }
# ok_total METRICS_ADDRESS -> "ok other unchanged"
ok_total() {
  curl -s "http://$1/metrics" |
    awk '/^weightpath_resolve_requests_total\{/ { if ($0 ~ /code="OK"/) ok += $2; else bad += $2 }
         /^weightpath_resolve_unchanged_total / { unchanged = $2 }
         END { printf "%d %d %d\n", ok, bad, unchanged }'
}

idle_rss=$(rss_kib VmRSS)

# run NAME URL_PATH BODY INFLIGHT [ADDRESS] -> "qps p50_us p99_us requests data_bytes"
run() {
  local name=$1 path=$2 body=$3 inflight=$4 address=${5:-$grpc_addr}
  local connections=$((inflight < 4 ? 1 : 4))
  local streams=$((inflight / connections))
  local log="$work/$name-$inflight.tsv"
  local out
  out=$(h2load -D "$duration" --warm-up-time "$warmup" -t "$threads" -c "$connections" \
    -m "$streams" -H 'content-type: application/grpc' -H 'te: trailers' -d "$body" \
    --log-file "$log" "http://$address$path")
  local qps succeeded data
  qps=$(sed -n 's/.*finished in .*, \([0-9.]*\) req\/s.*/\1/p' <<<"$out")
  succeeded=$(sed -n 's/^requests: .* \([0-9]*\) succeeded.*/\1/p' <<<"$out")
  data=$(sed -n 's/^traffic: .*, [0-9.A-Za-z]* (\([0-9]*\)) data.*/\1/p' <<<"$out")
  python3 - "$log" "$qps" "$succeeded" "$data" <<'PY'
import sys
durations = sorted(int(line.split("\t")[2]) for line in open(sys.argv[1]) if line.strip())
def pct(p):
    return durations[min(len(durations) - 1, int(p * len(durations)))]
succeeded = int(sys.argv[3] or 0)
per_call = int(sys.argv[4] or 0) // succeeded if succeeded else 0
print(f"{float(sys.argv[2]):.0f} {pct(0.50)} {pct(0.99)} {succeeded} {per_call}")
PY
}

printf "%-8s %-8s %-4s %10s %8s %8s %10s %10s\n" inflight service run qps p50_us p99_us requests resp_B
declare -A sum per_round
for inflight in $inflight_levels; do
  for round in $(seq "$rounds"); do
    order=$services
    # Alternate which arm goes first, so drift within a round favours neither.
    if [[ -n "$arm_b_env" ]] && ((round % 2 == 0)); then order="resolve_b resolve floor health"; fi
    for service in $order; do
      if [[ $service == floor ]]; then
        read -r qps p50 p99 n data < <(run floor /weightpath.v1.WeightPath/ResolveWeightPath \
          "$work/resolve.bin" "$inflight" "$floor_addr")
      elif [[ $service == resolve || $service == resolve_b ]]; then
        if [[ $service == resolve ]]; then
          address=$server_grpc metrics=$server_metrics
        else
          address=$server_b_grpc metrics=$server_b_metrics
        fi
        before=$(ok_total "$metrics")
        read -r qps p50 p99 n data < <(run "$service" /weightpath.v1.WeightPath/ResolveWeightPath \
          "$work/resolve.bin" "$inflight" "$address")
        after=$(ok_total "$metrics")
        read -r ok_before bad_before unchanged_before <<<"$before"
        read -r ok_after bad_after unchanged_after <<<"$after"
        if [[ ${KNOWN_ETAG:-0} == 1 ]] && ((unchanged_after - unchanged_before < n)); then
          echo "server answered $((unchanged_after - unchanged_before)) of $n resolves unchanged" >&2
          exit 1
        fi
        if ((bad_after != bad_before)); then
          echo "resolve calls failed on the server: $((bad_after - bad_before))" >&2; exit 1
        fi
        if ((ok_after - ok_before < n)); then
          echo "server counted $((ok_after - ok_before)) OK resolves, h2load $n" >&2; exit 1
        fi
      else
        read -r qps p50 p99 n data < <(run health /grpc.health.v1.Health/Check \
          "$work/health.bin" "$inflight")
      fi
      printf '%-8s %-8s %-4s %10s %8s %8s %10s %10s\n' "$inflight" "$service" "$round" "$qps" \
        "$p50" "$p99" "$n" "$data"
      sum[$service-$inflight]=$(( ${sum[$service-$inflight]:-0} + qps ))
      per_round[$service-$inflight]+="$qps "
    done
  done
done
loaded_rss=$(rss_kib VmRSS)
peak_rss=$(rss_kib VmHWM)

echo
for inflight in $inflight_levels; do
  # The machine's speed drifts between rounds, so besides the ratio of the
  # sums, the median of each round's own ratio (its three runs are adjacent).
  python3 - "$inflight" "${per_round[resolve-$inflight]}" "${per_round[floor-$inflight]}" \
    "${per_round[health-$inflight]}" "${per_round[resolve_b-$inflight]:-}" <<'PY'
import statistics, sys
level = sys.argv[1]
resolve, floor, health, resolve_b = ([float(x) for x in arg.split()] for arg in sys.argv[2:6])
n = len(resolve)
def ratios(a, b):
    per_round = [x / y for x, y in zip(a, b)]
    return (f"sums {sum(a) / sum(b):.3f}, median of rounds {statistics.median(per_round):.3f} "
            f"(rounds {min(per_round):.3f}-{max(per_round):.3f})")
print(f"inflight {level}: resolve {sum(resolve) / n:.0f} qps, floor {sum(floor) / n:.0f} qps, "
      f"health {sum(health) / n:.0f} qps (means of {n} rounds)")
print(f"  resolve/health: {ratios(resolve, health)}")
print(f"  resolve/floor:  {ratios(resolve, floor)}")
print(f"  floor/health:   {ratios(floor, health)}")
if resolve_b:
    print(f"  resolve_b {sum(resolve_b) / n:.0f} qps; resolve_b/health: {ratios(resolve_b, health)}")
    print(f"  resolve_b/floor: {ratios(resolve_b, floor)}")
    print(f"  resolve/resolve_b (A over B): {ratios(resolve, resolve_b)}")
PY
done
echo "server RSS: idle ${idle_rss} KiB, after load ${loaded_rss} KiB, peak ${peak_rss} KiB"
