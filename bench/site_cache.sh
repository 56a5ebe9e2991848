#!/usr/bin/env bash
# A site of N devices booting the same directory build at once: straight
# from the origin mirror (arm A), then through one `weightpath-agent
# serve-cache` with a cold cache that every agent names in
# artifact_mirrors (arm B). Prints, per arm, the wall time until the last
# boot ended and the bytes the origin sent (its request log); for B also
# the site cache's peak RSS and what its /metrics counted.
#
#   bench/site_cache.sh AGENT_BIN SERVER_BIN [DEVICES] [SHARD_MIB]
#
# The build: config.json and four SHARD_MIB MiB safetensors-shaped shards
# (default 32: 128 MiB), incompressible bytes. The origin is
# tests/agent/range_http_server.py serving the files by path (the catalog's
# uris) and by content address under /cas/blobs/sha256/<hex> (the site
# cache's upstream). Needs /usr/bin/time, openssl, curl.
set -euo pipefail
source "$(dirname "$0")/bench_lib.sh"

agent=${1:?usage: $0 AGENT_BIN SERVER_BIN [DEVICES] [SHARD_MIB]}
server=${2:?usage: $0 AGENT_BIN SERVER_BIN [DEVICES] [SHARD_MIB]}
devices=${3:-10}
shard_mib=${4:-32}
repo=$(cd "$(dirname "$0")/.." && pwd)
model=Spark-X2.5-1.7B

work=$(mktemp -d /tmp/wp-site-bench-XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

mkdir -p "$work/origin/build" "$work/origin/cas/blobs/sha256"
echo '{"architectures":["Qwen3ForCausalLM"]}' >"$work/origin/build/config.json"
for i in 1 2 3 4; do
  head -c "$((shard_mib * 1048576))" /dev/zero |
    openssl enc -aes-128-ctr -nosalt -pass "pass:weightpath-site-$i" -pbkdf2 2>/dev/null \
      >"$work/origin/build/model-0000$i-of-00004.safetensors"
done
for f in "$work"/origin/build/*; do
  ln "$f" "$work/origin/cas/blobs/sha256/$(sha256sum "$f" | cut -d' ' -f1)"
done
build_bytes=$(du -cb "$work"/origin/build/* | tail -1 | cut -f1)

python3 -u "$repo/tests/agent/range_http_server.py" --root "$work/origin" \
  --request-log "$work/origin.log" >"$work/origin.out" 2>"$work/origin.err" &
pids+=($!)
for _ in $(seq 1 100); do grep -q '^PORT ' "$work/origin.out" 2>/dev/null && break; sleep 0.1; done
origin=http://127.0.0.1:$(sed -n 's/^PORT //p' "$work/origin.out")

{
  mapfile -t paths < <(sed -n 's/^    \([a-z0-9][a-z0-9-]*\):$/\1/p' "$repo/server/config/demo_catalog.yaml")
  echo "default_model: $model"; echo "models:"; echo "  $model:"
  for path in "${paths[@]}"; do
    echo "    $path:"; echo "      version: \"site\""; echo "      files:"
    for f in "$work"/origin/build/*; do
      echo "        - path: $(basename "$f")"
      echo "          sha256: $(sha256sum "$f" | cut -d' ' -f1)"
      echo "          size_bytes: $(stat -c %s "$f")"
      echo "          uri: $origin/build/$(basename "$f")"
    done
  done
} >"$work/catalog.yaml"
bench_start_server "$server" "$work/catalog.yaml"
pids+=("$server_pid")
bench_use_amx_profile

origin_bytes() {
  awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^bytes=/) { sub("bytes=", "", $i); s += $i } } END { printf "%d", s }' \
    "$work/origin.log" 2>/dev/null || echo 0
}

boot_all() {  # arm mirrors_yaml
  local arm=$1 mirrors=$2 t0 t1 before failed=0 boots=()
  before=$(origin_bytes)
  for d in $(seq 1 "$devices"); do
    local dir=$work/$arm/device-$d
    mkdir -p "$dir"
    cat >"$dir/agent.yaml" <<YAML
server: $address
device_id: site-$arm-$d
state_dir: $dir/state
cache_dir: $dir/cache
decision_file: $dir/run/decision.json
env_file: $dir/run/engine.env
budget: 600
call_timeout: 10
$mirrors
YAML
  done
  t0=$(date +%s%N)
  for d in $(seq 1 "$devices"); do
    "$agent" boot --config "$work/$arm/device-$d/agent.yaml" 2>"$work/$arm/device-$d/boot.log" &
    boots+=($!)
  done
  for pid in "${boots[@]}"; do wait "$pid" || failed=$((failed + 1)); done
  t1=$(date +%s%N)
  printf '%-22s %3d devices  wall %6.2f s  origin sent %12d bytes (%5.2f x the build)  failed boots %d\n' \
    "$arm" "$devices" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print (b - a) / 1e9 }')" \
    "$(( $(origin_bytes) - before ))" \
    "$(awk -v a="$(( $(origin_bytes) - before ))" -v b="$build_bytes" 'BEGIN { print a / b }')" "$failed"
}

echo "build: $build_bytes bytes in 5 files; $(nproc) CPUs; load $(cut -d' ' -f1-3 /proc/loadavg)"
boot_all A-origin ""

/usr/bin/time -v -o "$work/cache.time" "$agent" serve-cache --listen 127.0.0.1:0 \
  --cache-dir "$work/site-cache" --upstream "$origin/cas" >"$work/cache.out" 2>"$work/cache.err" &
cache_pid=$!
pids+=($cache_pid)
for _ in $(seq 1 100); do grep -q '^LISTENING ' "$work/cache.out" 2>/dev/null && break; sleep 0.1; done
cache_port=$(sed -n 's/^LISTENING //p' "$work/cache.out")
[[ -n "$cache_port" ]] || { cat "$work/cache.err" >&2; exit 1; }
boot_all B-site-cache "artifact_mirrors:
  - http://127.0.0.1:$cache_port"
curl -sf "http://127.0.0.1:$cache_port/metrics" | grep -E '^weightpath_site_cache_[a-z_]+(_total)? ' || true
pkill -TERM -P "$cache_pid" || true; wait "$cache_pid" 2>/dev/null || true
echo "site cache peak RSS: $(sed -n 's/.*Maximum resident set size (kbytes): //p' "$work/cache.time") KiB"
