#!/usr/bin/env bash
# A directory build fetched by `weightpath-agent boot`, against the
# yardstick of the same files fetched by curl (all in parallel) and then
# hashed by `openssl dgst -sha256`, from the same local mirror in the same
# run (rounds alternate which goes first: this VM drifts between runs).
#
#   bench/build_fetch.sh AGENT_BIN SERVER_BIN [SHARD_MIB] [ROUNDS] [CACHED_BOOTS]
#
# The build: config.json, tokenizer.json, tokenizer_config.json, four
# safetensors shards of SHARD_MIB MiB each (default 512: a 2 GiB build) with
# real headers, and their index. The mirror is tests/agent/range_http_server.py
# (the download tests' server: Range, a request log with the body bytes of
# every response). Prints, per round, wall seconds of each arm, the agent's
# CPU seconds and peak RSS, openssl's CPU seconds (one hashing pass over
# the bytes); then an upgrade in which one shard changed (bytes the mirror
# sent against the shard's size); then CACHED_BOOTS (default 20) boots of
# the cached build (wall ms, peak RSS). Needs /usr/bin/time, curl, openssl.
set -euo pipefail
source "$(dirname "$0")/bench_lib.sh"

agent=${1:?usage: $0 AGENT_BIN SERVER_BIN [SHARD_MIB] [ROUNDS] [CACHED_BOOTS]}
server=${2:?usage: $0 AGENT_BIN SERVER_BIN [SHARD_MIB] [ROUNDS] [CACHED_BOOTS]}
shard_mib=${3:-512}
rounds=${4:-2}
cached_boots=${5:-20}
repo=$(cd "$(dirname "$0")/.." && pwd)
model=Spark-X2.5-1.7B

work=$(mktemp -d /tmp/wp-build-bench-XXXXXX)
mirror_pid=
server_pid=
cleanup() {
  for pid in $server_pid $mirror_pid; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# safetensors: 8-byte little-endian header length, the JSON header padded
# with spaces to a multiple of 8, the tensor bytes.
write_shard() {  # file tensor mib seed
  local file=$1 tensor=$2 mib=$3 seed=$4 header length
  header="{\"__metadata__\":{\"format\":\"pt\"},\"$tensor\":{\"dtype\":\"BF16\",\"shape\":[$((mib * 524288))],\"data_offsets\":[0,$((mib * 1048576))]}}"
  while (( ${#header} % 8 )); do header+=" "; done
  length=${#header}
  python3 -c "import struct,sys; sys.stdout.buffer.write(struct.pack('<Q', $length))" >"$file"
  printf '%s' "$header" >>"$file"
  # Incompressible, reproducible bytes: AES-CTR of zeros under a seeded key.
  head -c "$((mib * 1048576))" /dev/zero |
    openssl enc -aes-128-ctr -nosalt -pass "pass:weightpath-bench-$seed" -pbkdf2 2>/dev/null >>"$file"
}
write_build() {  # dir seed_of_last_shard
  local dir=$1 last_seed=$2
  mkdir -p "$dir"
  echo '{"architectures":["Qwen3ForCausalLM"],"quantization_config":{"quant_method":"gptq","bits":4,"group_size":128}}' >"$dir/config.json"
  echo '{"version":"1.0","model":{"type":"BPE"}}' >"$dir/tokenizer.json"
  echo '{"model_max_length":32768}' >"$dir/tokenizer_config.json"
  for i in 1 2 3; do write_shard "$dir/model-0000$i-of-00004.safetensors" "layer.$i" "$shard_mib" "$i"; done
  write_shard "$dir/model-00004-of-00004.safetensors" layer.4 "$shard_mib" "$last_seed"
  echo '{"metadata":{},"weight_map":{"layer.1":"model-00001-of-00004.safetensors"}}' >"$dir/model.safetensors.index.json"
}
echo "writing two builds of 4 x $shard_mib MiB (the second differs in its last shard) ..." >&2
write_build "$work/served/v1" 4
mkdir -p "$work/served/v2"
for f in "$work"/served/v1/*; do ln "$f" "$work/served/v2/$(basename "$f")"; done
rm "$work/served/v2/model-00004-of-00004.safetensors"
write_shard "$work/served/v2/model-00004-of-00004.safetensors" layer.4 "$shard_mib" 5

python3 -u "$repo/tests/agent/range_http_server.py" --root "$work/served" \
  --request-log "$work/mirror.log" >"$work/mirror.out" 2>"$work/mirror.err" &
mirror_pid=$!
for _ in $(seq 1 100); do grep -q '^PORT ' "$work/mirror.out" 2>/dev/null && break; sleep 0.1; done
port=$(sed -n 's/^PORT //p' "$work/mirror.out")
[[ -n "$port" ]] || { echo "mirror did not start" >&2; cat "$work/mirror.err" >&2; exit 1; }
mirror=http://127.0.0.1:$port

catalog() {  # version -> catalog on stdout: every path the demo catalog names gets the build
  local version=$1 paths
  mapfile -t paths < <(sed -n 's/^    \([a-z0-9][a-z0-9-]*\):$/\1/p' "$repo/server/config/demo_catalog.yaml")
  echo "default_model: $model"; echo "models:"; echo "  $model:"
  for path in "${paths[@]}"; do
    echo "    $path:"; echo "      version: \"$version\""; echo "      files:"
    for f in "$work/served/$version"/*; do
      echo "        - path: $(basename "$f")"
      echo "          sha256: $(sha256sum "$f" | cut -d' ' -f1)"
      echo "          size_bytes: $(stat -c %s "$f")"
      echo "          uri: $mirror/$version/$(basename "$f")"
    done
  done
}
catalog v1 >"$work/catalog-v1.yaml"
catalog v2 >"$work/catalog-v2.yaml"

start_server() {  # catalog
  if [[ -n "$server_pid" ]]; then kill "$server_pid"; wait "$server_pid" 2>/dev/null || true; fi
  bench_start_server "$server" "$1"
  cat >"$work/agent.yaml" <<YAML
server: $address
device_id: bench-build-0001
state_dir: $work/state
cache_dir: $work/cache
decision_file: $work/run/decision.json
env_file: $work/run/engine.env
budget: 600
call_timeout: 10
YAML
}
bench_use_amx_profile

mirror_bytes() {  # version -> body bytes the mirror sent for it so far
  awk -v v="/$1/" 'index($2, v) == 1 { sub("bytes=", "", $5); s += $5 } END { printf "%d", s }' "$work/mirror.log" 2>/dev/null || echo 0
}
seconds() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b - a) / 1e9 }'; }
time_field() { awk -F': ' -v k="$2" '$1 ~ k { print $2 }' "$1"; }

build_bytes=$(du -cb "$work"/served/v1/* | tail -1 | cut -f1)
start_server "$work/catalog-v1.yaml"
echo "build: $build_bytes bytes in $(ls "$work/served/v1" | wc -l) files; mirror $mirror; $(nproc) CPUs" >&2
printf '%-6s %-6s %9s %9s %9s %9s %9s %9s\n' round arm wall_s cpu_s rss_mib curl_s dgst_s dgst_cpu
agent_arm() {
  rm -rf "$work/cache" "$work/state" "$work/run"
  local t0 t1
  t0=$(date +%s%N)
  /usr/bin/time -v -o "$work/agent.time" "$agent" boot --config "$work/agent.yaml" 2>"$work/agent.log" ||
    { echo "agent boot failed:" >&2; tail -5 "$work/agent.log" >&2; exit 1; }
  t1=$(date +%s%N)
  local cpu
  cpu=$(awk -F': ' '/User time|System time/ { s += $2 } END { printf "%.2f", s }' "$work/agent.time")
  printf '%-6s %-6s %9s %9s %9s %9s %9s %9s\n' "$1" agent "$(seconds "$t0" "$t1")" "$cpu" \
    "$(awk '{ printf "%.1f", $1 / 1024 }' <<<"$(time_field "$work/agent.time" 'Maximum resident')")" - - -
}
curl_arm() {
  rm -rf "$work/curl"; mkdir -p "$work/curl"
  local t0 t1 t2 pids=()
  t0=$(date +%s%N)
  for f in "$work"/served/v1/*; do
    curl -sf -o "$work/curl/$(basename "$f")" "$mirror/v1/$(basename "$f")" & pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid"; done
  t1=$(date +%s%N)
  /usr/bin/time -v -o "$work/dgst.time" openssl dgst -sha256 "$work"/curl/* >/dev/null
  t2=$(date +%s%N)
  local cpu
  cpu=$(awk -F': ' '/User time|System time/ { s += $2 } END { printf "%.2f", s }' "$work/dgst.time")
  printf '%-6s %-6s %9s %9s %9s %9s %9s %9s\n' "$1" curl "$(seconds "$t0" "$t2")" - - \
    "$(seconds "$t0" "$t1")" "$(seconds "$t1" "$t2")" "$cpu"
  rm -rf "$work/curl"
}
for round in $(seq 1 "$rounds"); do
  if (( round % 2 )); then agent_arm "$round"; curl_arm "$round"; else curl_arm "$round"; agent_arm "$round"; fi
done

# The upgrade: one of four shards changed.
before=$(mirror_bytes v2)
start_server "$work/catalog-v2.yaml"
/usr/bin/time -v -o "$work/agent.time" "$agent" boot --config "$work/agent.yaml" 2>"$work/agent.log" ||
  { echo "upgrade boot failed:" >&2; tail -5 "$work/agent.log" >&2; exit 1; }
fetched=$(( $(mirror_bytes v2) - before ))
shard=$(stat -c %s "$work/served/v2/model-00004-of-00004.safetensors")
echo "upgrade (1 of 4 shards changed): fetched $fetched bytes, changed shard $shard bytes, ratio $(awk -v a="$fetched" -v b="$shard" 'BEGIN { printf "%.4f", a / b }')"

# Cached boots of the directory build.
walls=(); rss=()
for i in $(seq 1 "$cached_boots"); do
  t0=$(date +%s%N)
  /usr/bin/time -v -o "$work/agent.time" "$agent" boot --config "$work/agent.yaml" 2>"$work/agent.log"
  t1=$(date +%s%N)
  grep -q "already cached and verified" "$work/agent.log" || { echo "cached boot fetched" >&2; exit 1; }
  walls+=($(( (t1 - t0) / 1000000 )))
  rss+=("$(time_field "$work/agent.time" 'Maximum resident')")
done
median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
worst() { printf '%s\n' "$@" | sort -n | tail -1; }
echo "cached boot of the directory build, $cached_boots runs: wall median $(median "${walls[@]}") ms, max $(worst "${walls[@]}") ms; peak RSS median $(( $(median "${rss[@]}") / 1024 )) MiB, max $(( $(worst "${rss[@]}") / 1024 )) MiB"
