#!/usr/bin/env bash
# Wall time, CPU time and peak RSS of a full `weightpath-agent boot` (live
# probe, ResolveWeightPath against a local weightpath-server, cached
# artifact checked, hand-over files written), over several runs.
#
#   bench/agent_boot.sh AGENT_BIN SERVER_BIN [RUNS] [ARTIFACT_KIB]
#
# RUNS defaults to 20; ARTIFACT_KIB (the size of each catalog artifact)
# defaults to 256, the demo catalog's size: pass e.g. 262144 for 256 MiB.
# Artifacts are served by file:// URIs, so no HTTP server is involved; two
# warm-up boots fill the cache and stamp the artifact as verified.
#
# WP_AGENT_BENCH_FORCE_HASH=1 deletes the verified stamps before every
# measured boot, so each one hashes the whole artifact (and writes a new
# stamp): the cost of a boot without the stamp, for A/B runs.
# Needs /usr/bin/time (Debian package `time`).
set -euo pipefail

agent=${1:?usage: $0 AGENT_BIN SERVER_BIN [RUNS] [ARTIFACT_KIB]}
server=${2:?usage: $0 AGENT_BIN SERVER_BIN [RUNS] [ARTIFACT_KIB]}
runs=${3:-20}
artifact_kib=${4:-256}
repo=$(cd "$(dirname "$0")/.." && pwd)

work=$(mktemp -d /tmp/wp-agent-bench-XXXXXX)
# The hand-over files go where a device keeps them, on tmpfs (/run there,
# /dev/shm here when it is writable); state and cache stay on disk.
if run_dir=$(mktemp -d /dev/shm/wp-agent-bench-XXXXXX 2>/dev/null); then :; else
  run_dir=$work/run
fi
server_pid=
cleanup() {
  if [[ -n "$server_pid" ]]; then kill "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null; fi
  rm -rf "$work" "$run_dir"
}
trap cleanup EXIT

# Path names the bundled policy can hand out: the ones the demo catalog has.
mapfile -t paths < <(sed -n 's/^    \([a-z0-9][a-z0-9-]*\):$/\1/p' "$repo/server/demo_catalog.yaml")
model=Spark-X2.5-1.7B
mkdir -p "$work/artifacts"
{
  echo "default_model: $model"
  echo "models:"
  echo "  $model:"
  for path in "${paths[@]}"; do
    file="$work/artifacts/$path.bin"
    head -c "$((artifact_kib * 1024))" /dev/urandom >"$file"
    echo "    $path:"
    echo "      uri: file://$file"
    echo "      sha256: $(sha256sum "$file" | cut -d' ' -f1)"
    echo "      size_bytes: $(stat -c %s "$file")"
    echo "      version: \"bench\""
  done
} >"$work/catalog.yaml"

"$server" --listen=127.0.0.1:0 --metrics_listen=127.0.0.1:0 --catalog="$work/catalog.yaml" --store=none \
  --reload_interval=0s >"$work/server.out" 2>"$work/server.err" &
server_pid=$!
for _ in $(seq 1 600); do
  grep -q '^listening ' "$work/server.out" 2>/dev/null && break
  sleep 0.1
done
address=$(sed -n 's/^listening grpc=\([^ ]*\) .*/\1/p' "$work/server.out")
[[ -n "$address" ]] || { echo "server did not start:" >&2; cat "$work/server.err" >&2; exit 1; }

cat >"$work/agent.yaml" <<YAML
server: $address
device_id: bench-device-0001
state_dir: $work/state
cache_dir: $work/cache
decision_file: $run_dir/decision.json
env_file: $run_dir/engine.env
budget: 30
call_timeout: 5
YAML

# The first warm-up downloads; a fresh download is not stamped (its ctime
# is too recent), so the second hashes it and writes the stamp.
for warmup in 1 2; do
  "$agent" boot --config "$work/agent.yaml" 2>"$work/warmup.log" || {
    echo "warm-up boot $warmup failed (exit $?):" >&2; cat "$work/warmup.log" >&2; exit 1; }
  sleep 0.1
done
force_hash=${WP_AGENT_BENCH_FORCE_HASH:-0}

walls_ms=()
cpu_ms=()
rss_kib=()
hashed_boots=0
for run in $(seq 1 "$runs"); do
  if [[ "$force_hash" == 1 ]]; then rm -f "$work"/cache/*.verified; fi
  start=$(date +%s%N)
  /usr/bin/time -v -o "$work/time.$run" "$agent" boot --config "$work/agent.yaml" \
    2>"$work/boot.$run.log" || { echo "boot $run failed:" >&2; cat "$work/boot.$run.log" >&2; exit 1; }
  end=$(date +%s%N)
  grep -q "already cached and verified" "$work/boot.$run.log" ||
    { echo "boot $run downloaded again" >&2; exit 1; }
  if grep -q "already cached and verified (hashed)" "$work/boot.$run.log"; then
    hashed_boots=$((hashed_boots + 1))
  fi
  walls_ms+=("$(( (end - start) / 1000 ))")
  rss_kib+=("$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$work/time.$run")")
  # CPU time (user + system) shows the agent's own cost on a busy machine,
  # where wall time also counts waiting for a core.
  cpu_ms+=("$(awk -F': ' '/User time|System time/ { s += $2 } END { printf "%d", s * 1000 }' \
    "$work/time.$run")")
done

summary() {  # label unit divisor values...
  local label=$1 unit=$2 divisor=$3; shift 3
  printf '%s\n' "$@" | sort -n | awk -v label="$label" -v unit="$unit" -v d="$divisor" '
    { v[NR] = $1 / d }
    END { printf "%-14s min %.1f  median %.1f  p90 %.1f  max %.1f %s (n=%d)\n",
          label, v[1], v[int((NR + 1) / 2)], v[int(NR * 0.9 + 0.5)], v[NR], unit, NR }'
}
echo "weightpath-agent boot, artifact cached (${artifact_kib} KiB per artifact), $runs runs," \
  "$hashed_boots hashed the artifact (WP_AGENT_BENCH_FORCE_HASH=$force_hash)"
echo "machine: $(nproc) CPUs, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)," \
  "load average $(cut -d' ' -f1-3 /proc/loadavg)"
summary "wall time" ms 1000 "${walls_ms[@]}"
summary "cpu user+sys" ms 1 "${cpu_ms[@]}"
summary "peak RSS" MiB 1024 "${rss_kib[@]}"
