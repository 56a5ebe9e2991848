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
#        INFLIGHT ("1 16 64"), ROUNDS (per level, default 2), H2LOAD_THREADS (default 1)
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

work=$(mktemp -d)
server_pid=
floor_pid=
cleanup() {
  [[ -n "$server_pid" ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  [[ -n "$floor_pid" ]] && kill "$floor_pid" 2>/dev/null && wait "$floor_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

"$body_tool" "$profile" "$work/resolve.bin" "$work/health.bin" >&2
# The fleet registry is measured on its own (bench/fleet_run.sh); here it is
# off so the figure is the resolve path itself, and no database file is left.
"$server_bin" --listen=127.0.0.1:0 --metrics_listen=127.0.0.1:0 --reload_interval=0s \
  ${SERVER_ARGS:---store=none} \
  >"$work/server.out" 2>"$work/server.log" &
server_pid=$!
for _ in $(seq 300); do grep -q '^listening ' "$work/server.out" 2>/dev/null && break; sleep 0.1; done
grpc_addr=$(sed -n 's/^listening grpc=\([^ ]*\) .*/\1/p' "$work/server.out")
metrics_addr=$(sed -n 's/.* metrics=\([^ ]*\)$/\1/p' "$work/server.out")
[[ -n "$grpc_addr" ]] || { cat "$work/server.log" >&2; exit 1; }
"$floor_bin" "$profile" 127.0.0.1:0 >"$work/floor.out" 2>"$work/floor.log" &
floor_pid=$!
for _ in $(seq 300); do grep -q '^listening ' "$work/floor.out" 2>/dev/null && break; sleep 0.1; done
floor_addr=$(sed -n 's/^listening grpc=\([^ ]*\)$/\1/p' "$work/floor.out")
[[ -n "$floor_addr" ]] || { cat "$work/floor.log" >&2; exit 1; }

rss_kib() { awk -v k="$1:" '$1 == k {print $2}' "/proc/$server_pid/status"; }
ok_total() {
  curl -s "http://$metrics_addr/metrics" |
    awk '/^weightpath_resolve_requests_total\{/ { if ($0 ~ /code="OK"/) ok += $2; else bad += $2 }
         END { printf "%d %d\n", ok, bad }'
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
    for service in resolve floor health; do
      if [[ $service == floor ]]; then
        read -r qps p50 p99 n data < <(run floor /weightpath.v1.WeightPath/ResolveWeightPath \
          "$work/resolve.bin" "$inflight" "$floor_addr")
      elif [[ $service == resolve ]]; then
        before=$(ok_total)
        read -r qps p50 p99 n data < <(run resolve /weightpath.v1.WeightPath/ResolveWeightPath \
          "$work/resolve.bin" "$inflight")
        after=$(ok_total)
        read -r ok_before bad_before <<<"$before"
        read -r ok_after bad_after <<<"$after"
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
    "${per_round[health-$inflight]}" <<'PY'
import statistics, sys
level = sys.argv[1]
resolve, floor, health = ([float(x) for x in arg.split()] for arg in sys.argv[2:5])
n = len(resolve)
def ratios(a, b):
    return f"sums {sum(a) / sum(b):.3f}, median of rounds {statistics.median(x / y for x, y in zip(a, b)):.3f}"
print(f"inflight {level}: resolve {sum(resolve) / n:.0f} qps, floor {sum(floor) / n:.0f} qps, "
      f"health {sum(health) / n:.0f} qps (means of {n} rounds)")
print(f"  resolve/health: {ratios(resolve, health)}")
print(f"  resolve/floor:  {ratios(resolve, floor)}")
print(f"  floor/health:   {ratios(floor, health)}")
PY
done
echo "server RSS: idle ${idle_rss} KiB, after load ${loaded_rss} KiB, peak ${peak_rss} KiB"
