#!/usr/bin/env bash
# Wall time, CPU time and peak RSS of a full `weightpath-agent boot` (live
# probe, ResolveWeightPath against a local weightpath-server, cached
# artifact checked, hand-over files written), over several runs.
#
#   bench/agent_boot.sh AGENT_BIN SERVER_BIN [RUNS] [ARTIFACT_KIB]
#
# RUNS (per arm) defaults to 20; ARTIFACT_KIB (the size of each catalog artifact)
# defaults to 256, the demo catalog's size: pass e.g. 262144 for 256 MiB.
# Artifacts are served by file:// URIs, so no HTTP server is involved; two
# warm-up boots fill the cache and stamp the artifact as verified.
#
# WP_AGENT_BENCH_FORCE_HASH=1 deletes the verified stamps before every
# measured boot, so each one hashes the whole artifact (and writes a new
# stamp): the cost of a boot without the stamp, for A/B runs.
#
# TRUST=ab measures signed artifacts (TUF) A/B in one session: arm A boots
# without a trust block (as above), arm B with one (trust.root,
# trust.metadata_url), against a repository made by weightpathctl repo that
# signs every catalog artifact, its metadata served over loopback HTTP by
# python3 -m http.server. Each round boots both arms, alternating which goes
# first; every measured B boot must find the metadata unchanged (it fetches
# the probe for the next root and timestamp.json, and re-verifies the
# persisted snapshot and targets, unless the state's stamp vouches for them)
# and the artifact cached. CTL_BIN names
# weightpathctl (default: the build's, next to AGENT_BIN); TRUST_TARGETS=N
# (default 0) adds N more targets to the signed targets, for the cost of a
# large targets file. WP_AGENT_BENCH_NO_TRUST_STAMP=1 deletes the trust
# state's stamp before every measured B boot, so each one verifies every
# signature of the persisted metadata again (the cost without the stamp).
# Needs /usr/bin/time (Debian package `time`).
set -euo pipefail
source "$(dirname "$0")/bench_lib.sh"

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
http_pid=
trust_mode=${TRUST:-off}
[[ "$trust_mode" == off || "$trust_mode" == ab ]] || { echo "TRUST must be off or ab" >&2; exit 2; }
cleanup() {
  if [[ -n "$server_pid" ]]; then kill "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null; fi
  if [[ -n "$http_pid" ]]; then kill "$http_pid" 2>/dev/null; wait "$http_pid" 2>/dev/null; fi
  rm -rf "$work" "$run_dir"
}
trap cleanup EXIT

# Path names the bundled policy can hand out: the ones the demo catalog has.
mapfile -t paths < <(sed -n 's/^    \([a-z0-9][a-z0-9-]*\):$/\1/p' "$repo/server/config/demo_catalog.yaml")
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
    if [[ "$trust_mode" == ab ]]; then echo "      target_path: $path.bin"; fi
  done
} >"$work/catalog.yaml"

if [[ "$trust_mode" == ab ]]; then
  ctl=${CTL_BIN:-$(dirname "$agent")/../ctl/weightpathctl}
  [[ -x "$ctl" ]] || { echo "weightpathctl not found at $ctl (set CTL_BIN)" >&2; exit 1; }
  "$ctl" repo init --repo "$work/repo" --generate-keys "$work/keys" >/dev/null
  for path in "${paths[@]}"; do
    "$ctl" repo add-target --repo "$work/repo" --path "$path.bin" --file "$work/artifacts/$path.bin" \
      --model "$model" --weight-path "$path" --version bench \
      --hardware-classes jetson,cuda_discrete,arm64_cpu,x86_cpu,npu_phone >/dev/null
  done
  for i in $(seq 1 "${TRUST_TARGETS:-0}"); do
    "$ctl" repo add-target --repo "$work/repo" --path "extra/build-$i.bin" --length "$((1000000 + i))" \
      --sha256 "$(printf '%064x' "$i")" --model "$model" --weight-path w4a8-amx --version bench \
      --hardware-classes x86_cpu --canary >/dev/null
  done
  "$ctl" repo sign --repo "$work/repo" --role targets --key "$work/keys/targets.pem" >/dev/null
  "$ctl" repo timestamp --repo "$work/repo" --key "$work/keys/timestamp.pem" \
    --snapshot-key "$work/keys/snapshot.pem" >/dev/null
  python3 -m http.server --bind 127.0.0.1 --directory "$work/repo/metadata" 0 \
    >"$work/http.out" 2>"$work/http.err" &
  http_pid=$!
  for _ in $(seq 1 300); do
    grep -q 'port [0-9]' "$work/http.out" 2>/dev/null && break
    sleep 0.1
  done
  http_port=$(sed -n 's/.* port \([0-9]*\).*/\1/p' "$work/http.out" | head -1)
  [[ -n "$http_port" ]] || { echo "metadata server did not start:" >&2; cat "$work/http.err" >&2; exit 1; }
  targets_bytes=$(stat -c %s "$work/repo/metadata/targets.json")
fi

bench_start_server "$server" "$work/catalog.yaml"

# Arm A: no trust block. Arm B (TRUST=ab): the same device with one; its
# own state_dir, the same cache.
write_config() {  # file state_dir [trust]
  cat >"$1" <<YAML
server: $address
device_id: bench-device-0001
state_dir: $2
cache_dir: $work/cache
decision_file: $run_dir/decision.json
env_file: $run_dir/engine.env
budget: 30
call_timeout: 5
YAML
  if [[ "${3:-}" == trust ]]; then
    printf 'trust:\n  root: %s\n  metadata_url: http://127.0.0.1:%s\n' \
      "$work/repo/metadata/1.root.json" "$http_port" >>"$1"
  fi
}
write_config "$work/agent.yaml" "$work/state"
arms=(a)
if [[ "$trust_mode" == ab ]]; then
  write_config "$work/agent-trust.yaml" "$work/state-trust" trust
  arms=(a b)
fi
config_of() { [[ "$1" == a ]] && echo "$work/agent.yaml" || echo "$work/agent-trust.yaml"; }

# The first warm-up downloads; a fresh download is not stamped (its ctime
# is too recent), so the second hashes it and writes the stamp. Arm B's
# first warm-up also fetches and persists the whole metadata, its second
# verifies the persisted state again and stamps it (trust-state.json.verified),
# so the measured boots run no signature check unless WP_AGENT_BENCH_NO_TRUST_STAMP=1
# deletes that stamp before each of them.
for arm in "${arms[@]}"; do
  for warmup in 1 2; do
    "$agent" boot --config "$(config_of "$arm")" 2>"$work/warmup.log" || {
      echo "warm-up boot $warmup ($arm) failed (exit $?):" >&2; cat "$work/warmup.log" >&2; exit 1; }
    sleep 0.1
  done
done
force_hash=${WP_AGENT_BENCH_FORCE_HASH:-0}

declare -A walls_ms cpu_ms rss_kib hashed_boots
stamped_boots=0
for arm in "${arms[@]}"; do walls_ms[$arm]=; cpu_ms[$arm]=; rss_kib[$arm]=; hashed_boots[$arm]=0; done
measure() {  # arm run
  local arm=$1 run=$2
  if [[ "$force_hash" == 1 ]]; then rm -f "$work"/cache/*.verified; fi
  if [[ "${WP_AGENT_BENCH_NO_TRUST_STAMP:-0}" == 1 ]]; then rm -f "$work/state-trust/trust-state.json.verified"; fi
  local log="$work/boot.$arm.$run.log" timing="$work/time.$arm.$run"
  local start end
  start=$(date +%s%N)
  /usr/bin/time -v -o "$timing" "$agent" boot --config "$(config_of "$arm")" \
    2>"$log" || { echo "boot $run ($arm) failed:" >&2; cat "$log" >&2; exit 1; }
  end=$(date +%s%N)
  grep -q "already cached and verified" "$log" ||
    { echo "boot $run ($arm) downloaded again" >&2; exit 1; }
  if [[ "$arm" == b ]]; then
    grep -q "trust: metadata current: .* (timestamp unchanged" "$log" && grep -q "trust: target .* verified" "$log" ||
      { echo "boot $run (b) did not verify against unchanged metadata:" >&2; cat "$log" >&2; exit 1; }
    if grep -q "signatures were verified when it was written" "$log"; then
      stamped_boots=$((stamped_boots + 1))
    fi
  fi
  if grep -Eq "already cached and verified at .* \([1-9][0-9]* hashed\)" "$log"; then
    hashed_boots[$arm]=$((hashed_boots[$arm] + 1))
  fi
  walls_ms[$arm]+=" $(( (end - start) / 1000 ))"
  rss_kib[$arm]+=" $(sed -n 's/.*Maximum resident set size (kbytes): //p' "$timing")"
  # CPU time (user + system) shows the agent's own cost on a busy machine,
  # where wall time also counts waiting for a core.
  cpu_ms[$arm]+=" $(awk -F': ' '/User time|System time/ { s += $2 } END { printf "%d", s * 1000 }' \
    "$timing")"
}
for run in $(seq 1 "$runs"); do
  if [[ "${#arms[@]}" == 2 && $((run % 2)) == 0 ]]; then
    measure b "$run"; measure a "$run"
  else
    for arm in "${arms[@]}"; do measure "$arm" "$run"; done
  fi
done

summary() {  # label unit divisor values...
  local label=$1 unit=$2 divisor=$3; shift 3
  printf '%s\n' "$@" | sort -n | awk -v label="$label" -v unit="$unit" -v d="$divisor" '
    { v[NR] = $1 / d }
    END { printf "%-14s min %.1f  median %.1f  p90 %.1f  max %.1f %s (n=%d)\n",
          label, v[1], v[int((NR + 1) / 2)], v[int(NR * 0.9 + 0.5)], v[NR], unit, NR }'
}
echo "weightpath-agent boot, artifact cached (${artifact_kib} KiB per artifact), $runs runs per arm" \
  "(WP_AGENT_BENCH_FORCE_HASH=$force_hash, TRUST=$trust_mode)"
echo "machine: $(nproc) CPUs, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)," \
  "load average $(cut -d' ' -f1-3 /proc/loadavg)"
for arm in "${arms[@]}"; do
  if [[ "$arm" == a ]]; then
    echo "A: no trust block; ${hashed_boots[a]} boot(s) hashed the artifact"
  else
    echo "B: trust block, metadata unchanged ($((${#paths[@]} + ${TRUST_TARGETS:-0})) targets," \
      "targets.json $targets_bytes bytes); ${hashed_boots[b]} boot(s) hashed the artifact;" \
      "$stamped_boots restored the stamped state without checking its signatures again"
  fi
  # shellcheck disable=SC2086  # the lists are space-separated numbers
  summary "  wall time" ms 1000 ${walls_ms[$arm]}
  # shellcheck disable=SC2086
  summary "  cpu user+sys" ms 1 ${cpu_ms[$arm]}
  # shellcheck disable=SC2086
  summary "  peak RSS" MiB 1024 ${rss_kib[$arm]}
done
