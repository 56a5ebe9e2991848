#!/usr/bin/env bash
# The arm64 agent as an arm64 device gets it, run here under qemu-user:
# cpack makes the weightpath-agent .deb from the arm64 tree (Architecture
# arm64, Depends named by dpkg-shlibdeps from the sysroot's arm64 packages);
# it is unpacked into a scratch root, and its binary
#  - probes every captured tree of tests/data/hardware (--root; a live probe
#    under qemu-user would read the host's x86 /proc/cpuinfo) and must print
#    byte for byte what the amd64 build prints, and
#  - boots against the amd64 weightpath-server with trust on: a repository
#    made and signed by the amd64 weightpathctl, its metadata and the
#    artifacts on an HTTP mirror on loopback. So the resolve (gRPC), the
#    download (libcurl, dlopen()ed from the sysroot), the TUF checks
#    (ed25519, SHA-256) and the hand-over all run as arm64 code.
#   usage: arm64_agent_test.sh HOST_BUILD_DIR ARM64_BUILD_DIR SOURCE_DIR
set -euo pipefail
host_build=$(realpath "$1")
arm64_build=$(realpath "$2")
source_dir=$(realpath "$3")
sysroot=$arm64_build/sysroot
qemu=(qemu-aarch64-static -L "$sysroot")
work=$(mktemp -d /tmp/weightpath-arm64-XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "arm64_agent_test: $*" >&2; exit 1; }

# The package.
(cd "$arm64_build" && cpack -G DEB -B "$work/debs" >"$work/cpack.log" 2>&1) ||
  { cat "$work/cpack.log" >&2; fail "cpack failed"; }
debs=("$work"/debs/*.deb)
[[ ${#debs[@]} -eq 1 && ${debs[0]} == */weightpath-agent_*_arm64.deb ]] ||
  fail "expected one weightpath-agent_*_arm64.deb, cpack made: ${debs[*]##*/}"
deb=${debs[0]}
[[ $(dpkg-deb -f "$deb" Architecture) == arm64 ]] || fail "Architecture is not arm64"
depends=$(dpkg-deb -f "$deb" Depends)
for library in 'libc6 (>= 2.34)' libgrpc++1.51 libprotobuf32 libyaml-cpp0.7 libssl3; do
  [[ $depends == *"$library"* ]] || fail "Depends lacks $library: $depends"
done
[[ $depends != *-dev* ]] || fail "depends on a -dev package: $depends"
[[ $depends != *amd64* ]] || fail "depends on an amd64 package: $depends"
dpkg-deb -e "$deb" "$work/control"
grep -qx /etc/weightpath/agent.yaml "$work/control/conffiles" ||
  fail "agent.yaml is not a conffile (an upgrade would overwrite the operator's edits)"
root=$work/root
dpkg-deb -x "$deb" "$root"
for file in usr/bin/weightpath-agent usr/lib/systemd/system/weightpath-agent.service \
    usr/lib/systemd/system/weightpath-agent-run.service etc/weightpath/agent.yaml; do
  [[ -e $root/$file ]] || fail "/$file is not in the package"
done
agent=$root/usr/bin/weightpath-agent
file "$agent" | grep -q 'ARM aarch64' || fail "not an aarch64 binary: $(file "$agent")"
echo "$(basename "$deb"): $(stat -c %s "$deb") bytes, agent $(stat -c %s "$agent") bytes," \
  "Depends: $depends"

# The probe on every captured tree, against the amd64 build's output.
arm_trees=0
for tree in "$source_dir"/tests/data/hardware/*/; do
  name=$(basename "$tree")
  "$host_build/agent/weightpath-agent" probe --root "$tree" -o json >"$work/$name.amd64.json"
  "${qemu[@]}" "$agent" probe --root "$tree" -o json >"$work/$name.arm64.json" ||
    fail "probe --root $name exited $? under qemu"
  cmp -s "$work/$name.amd64.json" "$work/$name.arm64.json" ||
    { diff "$work/$name.amd64.json" "$work/$name.arm64.json" >&2 || true;
      fail "probe --root $name: the arm64 build's profile differs from the amd64 build's"; }
  if grep -q '^CPU implementer' "$tree/proc/cpuinfo" 2>/dev/null; then arm_trees=$((arm_trees + 1)); fi
done
((arm_trees >= 4)) || fail "only $arm_trees arm64 trees under tests/data/hardware"
echo "probe --root: the same JSON from both builds on $(ls -d "$source_dir"/tests/data/hardware/*/ | wc -l) trees ($arm_trees arm64)"

# One boot with trust on. The catalog offers every path of the demo catalog
# (whichever the bundled policy picks for this profile), each a target of
# a signed repository.
ctl=$host_build/ctl/weightpathctl
mapfile -t paths < <(sed -n 's/^    \([a-z0-9][a-z0-9-]*\):$/\1/p' \
  "$source_dir/server/config/demo_catalog.yaml")
((${#paths[@]} > 0)) || fail "no paths in the demo catalog"
model=Spark-X2.5-1.7B
mirror=$work/mirror
mkdir -p "$mirror/artifacts"
"$ctl" repo init --repo "$mirror/repo" --generate-keys "$work/keys" >/dev/null
python3 -u -m http.server --bind 127.0.0.1 --directory "$mirror" 0 >"$work/mirror.out" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do
  grep -q 'port [0-9]' "$work/mirror.out" && break
  sleep 0.1
done
mirror_port=$(sed -n 's/.* port \([0-9]*\).*/\1/p' "$work/mirror.out" | head -n 1)
[[ -n $mirror_port ]] || { cat "$work/mirror.out" >&2; fail "the mirror did not start"; }
{
  echo "default_model: $model"
  echo "models:"
  echo "  $model:"
  for path in "${paths[@]}"; do
    file=$mirror/artifacts/$path.bin
    head -c 65536 /dev/urandom >"$file"
    echo "    $path:"
    echo "      uri: http://127.0.0.1:$mirror_port/artifacts/$path.bin"
    echo "      sha256: $(sha256sum "$file" | cut -d' ' -f1)"
    echo "      size_bytes: 65536"
    echo "      version: \"arm64\""
    echo "      target_path: $path.bin"
    "$ctl" repo add-target --repo "$mirror/repo" --path "$path.bin" --file "$file" \
      --model "$model" --weight-path "$path" --version arm64 \
      --hardware-classes jetson,cuda_discrete,arm64_cpu,x86_cpu,npu_phone >/dev/null
  done
} >"$work/catalog.yaml"
"$ctl" repo sign --repo "$mirror/repo" --role targets --key "$work/keys/targets.pem" >/dev/null
"$ctl" repo timestamp --repo "$mirror/repo" --key "$work/keys/timestamp.pem" \
  --snapshot-key "$work/keys/snapshot.pem" >/dev/null

"$host_build/server/weightpath-server" --listen=127.0.0.1:0 --metrics_listen=127.0.0.1:0 \
  --catalog="$work/catalog.yaml" --store=none --reload_interval=0s \
  >"$work/server.out" 2>"$work/server.err" &
pids+=($!)
for _ in $(seq 1 300); do
  grep -q '^listening ' "$work/server.out" && break
  sleep 0.1
done
address=$(sed -n 's/^listening grpc=\([^ ]*\) .*/\1/p' "$work/server.out")
[[ -n $address ]] || { cat "$work/server.err" >&2; fail "the server did not start"; }

# The device: a Graviton 3 as the arm64 probe sees its captured tree.
"${qemu[@]}" "$agent" probe --root "$source_dir/tests/data/hardware/aws-graviton3" -o json \
  >"$work/profile.json"
cat >"$work/agent.yaml" <<YAML
server: $address
device_id: arm64-qemu-0001
state_dir: $work/device/state
cache_dir: $work/device/cache
decision_file: $work/device/run/decision.json
env_file: $work/device/run/engine.env
budget: 60
call_timeout: 20
trust:
  root: $mirror/repo/metadata/1.root.json
  metadata_url: http://127.0.0.1:$mirror_port/repo/metadata
YAML
status=0
started=$(date +%s%N)
WEIGHTPATH_HW_PROFILE=$work/profile.json "${qemu[@]}" "$agent" boot --config "$work/agent.yaml" \
  >"$work/agent.log" 2>&1 || status=$?
elapsed_ms=$((($(date +%s%N) - started) / 1000000))
if [[ $status -ne 0 ]]; then
  cat "$work/agent.log" "$work/server.err" >&2
  fail "the arm64 agent's boot exited $status (0 = a decision from the server, verified)"
fi
grep -q 'trust: target .* verified' "$work/agent.log" ||
  { cat "$work/agent.log" >&2; fail "the boot did not check the target against the signed metadata"; }
grep -Eq 'boot: .*downloaded [0-9]+ bytes' "$work/agent.log" ||
  { cat "$work/agent.log" >&2; fail "the boot downloaded nothing"; }
grep -q WEIGHTPATH_ENGINE_ARGS "$work/device/run/engine.env" || fail "no engine.env handed over"
chosen=$(sed -n 's/.*boot: server .* path \([^ ]*\) for model.*/\1/p' "$work/agent.log")
[[ -n $chosen ]] || { cat "$work/agent.log" >&2; fail "the log names no path"; }
cmp -s "$mirror/artifacts/$chosen.bin" "$work/device/cache/$(sha256sum "$mirror/artifacts/$chosen.bin" | cut -d' ' -f1)" ||
  fail "the cached artifact is not the mirror's $chosen.bin"
echo "arm64 boot against the amd64 server, trust on: path $chosen, downloaded and verified" \
  "in $elapsed_ms ms under qemu"
echo "arm64_agent_test: the arm64 package installs, probes like amd64 and boots with trust on"
