#!/usr/bin/env bash
# The Debian packages as an operator gets them: cpack builds the three from
# this build tree, each is unpacked into a scratch root (dpkg-deb -x: no root
# needed, nothing touches the host), its control data is checked (runtime
# library dependencies only, conffiles, the server's user-creating postinst),
# and then the server runs from the unpacked layout on the packaged example
# config (ports and store moved into the scratch directory), weightpathctl
# resolves against it, and the agent probes and boots against it, fetching
# and verifying the demo artifact from a loopback mirror, on the packaged
# agent.yaml (neutral defaults: no labels, no priority). Every library the
# agent dlopen()s in those runs must be declared by its package (Depends, or
# Suggests for the GPU driver's), and the agent is booted once more in a
# root that holds its package's link-time libraries but not libcurl (a user
# namespace and chroot, no root needed): it must exit 5, which the unit does
# not count as success, naming libcurl.so.4. cpack must leave no
# install_manifest_*.txt in the build tree.
#   usage: packages_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build_dir=$1
source_dir=$2
work=$(mktemp -d /tmp/weightpath-packages-XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "packages_test: $*" >&2; exit 1; }
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

(cd "$build_dir" && cpack -G DEB -B "$work/debs" >"$work/cpack.log" 2>&1) ||
  { cat "$work/cpack.log" >&2; fail "cpack failed"; }
for component in server agent ctl; do
  [[ ! -e $build_dir/install_manifest_$component.txt ]] ||
    fail "cpack left $build_dir/install_manifest_$component.txt (cmake/CPackDropInstallManifests.cmake)"
done
root=$work/root
for package in weightpath-server weightpath-agent weightpathctl; do
  deb=$(ls "$work/debs/${package}_"*.deb 2>/dev/null | head -n 1)
  [[ -n $deb ]] || fail "no $package package in $work/debs"
  depends=$(dpkg-deb -f "$deb" Depends)
  [[ $depends == *libc6* ]] || fail "$package: Depends lacks the shared libraries: $depends"
  [[ $depends != *-dev* ]] || fail "$package: depends on a -dev package: $depends"
  dpkg-deb -x "$deb" "$root"
  echo "$package: $(dpkg-deb -f "$deb" Version), Depends: $depends"
done
for file in usr/bin/weightpath-server usr/bin/weightpath-agent usr/bin/weightpathctl \
    usr/lib/systemd/system/weightpath-server.service usr/lib/systemd/system/weightpath-agent.service \
    usr/lib/systemd/system/weightpath-agent-run.service \
    usr/lib/systemd/system/weightpath-site-cache.service etc/weightpath/server.yaml \
    etc/weightpath/agent.yaml; do
  [[ -e $root/$file ]] || fail "/$file is not in any package"
done
server_deb=$(ls "$work/debs/weightpath-server_"*.deb)
dpkg-deb -e "$server_deb" "$work/server-control"
grep -qx /etc/weightpath/server.yaml "$work/server-control/conffiles" ||
  fail "server.yaml is not a conffile (an upgrade would overwrite the operator's edits)"
grep -q "useradd --system" "$work/server-control/postinst" || fail "postinst creates no system user"
grep -q "^User=weightpath" "$root/usr/lib/systemd/system/weightpath-server.service" ||
  fail "the server unit does not run as the weightpath user"
sh -n "$work/server-control/postinst" && sh -n "$work/server-control/postrm"

# What the agent loads with dlopen, which dpkg-shlibdeps cannot see: its
# package declares each (checked against what the runs below load).
agent_deb=$(ls "$work/debs/weightpath-agent_"*.deb)
agent_depends=$(dpkg-deb -f "$agent_deb" Depends)
agent_suggests=$(dpkg-deb -f "$agent_deb" Suggests)
[[ $agent_depends == *"libcurl4 (>= 7.85.0)"* ]] ||
  fail "weightpath-agent does not depend on libcurl4, which it loads for every download: $agent_depends"
[[ $agent_suggests == *libcuda1* && $agent_suggests == *libnvidia-ml1* ]] ||
  fail "weightpath-agent does not suggest the NVIDIA driver's libraries: $agent_suggests"
if readelf -d "$root/usr/bin/weightpath-agent" | grep -q 'NEEDED.*libcurl'; then
  fail "the agent links libcurl: the explicit Depends and the no-libcurl root below assume dlopen"
fi
# The soname each dlopen()ed library is declared under, by package.
declare -A declared_by=([libcurl.so.4]=libcurl4 [libcuda.so.1]=libcuda1
                        [libnvidia-ml.so.1]=libnvidia-ml1)
check_dlopened() {  # LD_DEBUG=files output files of one run
  local soname
  for soname in $(sed -n 's/.*file=\([^ ]*\) \[0\];  dynamically loaded by .*weightpath-agent.*/\1/p' "$@" |
                    sort -u); do
    local package=${declared_by[$soname]:-}
    [[ -n $package ]] ||
      fail "the agent dlopen()s $soname, which its package does not declare (cmake/Packaging.cmake)"
    [[ "$agent_depends, $agent_suggests" == *"$package"* ]] ||
      fail "the agent dlopen()s $soname, but its package names no $package"
    echo "dlopen()ed: $soname, declared: $package"
  done
}

# The packaged agent.yaml: neutral, so a device is labelled only by intent.
if grep -nE '^(priority|labels|model):' "$root/etc/weightpath/agent.yaml"; then
  fail "the packaged agent.yaml sets a priority, labels or a model for every device"
fi

# The packaged config, as an operator would start from it: only the ports
# and the store's directory differ.
grpc_port=$(free_port)
metrics_port=$(free_port)
mirror_port=$(free_port)
sed -e "s|^listen: .*|listen: 127.0.0.1:$grpc_port|" \
    -e "s|^metrics_listen: .*|metrics_listen: 127.0.0.1:$metrics_port|" \
    -e "s|/var/lib/weightpath-server|$work/state|" \
    "$root/etc/weightpath/server.yaml" >"$work/server.yaml"
mkdir -p "$work/state"
# The demo catalog, its artifacts served from a free port.
"$source_dir/scripts/make-demo-artifacts" "$work/artifacts" >/dev/null
sed "s|127.0.0.1:8765|127.0.0.1:$mirror_port|g" "$source_dir/server/config/demo_catalog.yaml" \
  >"$work/catalog.yaml"
python3 -m http.server "$mirror_port" --bind 127.0.0.1 --directory "$work/artifacts" \
  >"$work/mirror.log" 2>&1 &
pids+=($!)
(cd "$work/state" && exec "$root/usr/bin/weightpath-server" --config "$work/server.yaml" \
   --catalog "$work/catalog.yaml") >"$work/server.log" 2>&1 &
pids+=($!)

address=127.0.0.1:$grpc_port
ctl=$root/usr/bin/weightpathctl
answer=
for _ in $(seq 1 100); do
  if answer=$("$ctl" resolve --server "$address" \
       --profile "$source_dir/examples/profiles/intel-sapphire-rapids.json" -o json 2>/dev/null); then
    break
  fi
  answer=
  sleep 0.1
done
[[ -n $answer ]] || { cat "$work/server.log" >&2; fail "the installed server did not answer"; }
python3 -c 'import json, sys; r = json.loads(sys.argv[1]); assert r["weight_path"]["name"], r' \
  "$answer" || fail "weightpathctl resolve gave no weight path: $answer"
echo "weightpathctl resolve against the installed server: ok"

mkdir -p "$work/ld-debug"
LD_DEBUG=files LD_DEBUG_OUTPUT=$work/ld-debug/probe "$root/usr/bin/weightpath-agent" probe -o json \
  >"$work/probe.json" || fail "agent probe failed"
# The packaged agent.yaml as an operator starts from it: this server, no TLS
# (the test server is plaintext), a device id, and its paths under PREFIX.
agent_config() {  # PREFIX DEVICE_ID
  awk '/^tls:/ {skip = 1; next} skip && /^[[:space:]]/ {next} {skip = 0; print}' \
      "$root/etc/weightpath/agent.yaml" |
    sed -e "s|^server: .*|server: $address|" -e "s|^budget: .*|budget: 20|" \
        -e "s|/var/lib/weightpath|$1/state|" -e "s|/var/cache/weightpath|$1/cache|" \
        -e "s|/run/weightpath|$1/run|"
  echo "device_id: $2"
}
agent_config "$work/agent" package-test-0001 >"$work/agent.yaml"
status=0
WEIGHTPATH_HW_PROFILE=$source_dir/examples/profiles/intel-sapphire-rapids.json \
  LD_DEBUG=files LD_DEBUG_OUTPUT=$work/ld-debug/boot \
  "$root/usr/bin/weightpath-agent" boot --config "$work/agent.yaml" >"$work/agent.log" 2>&1 ||
  status=$?
if [[ $status -ne 0 ]]; then
  cat "$work/agent.log" "$work/server.log" >&2
  fail "the installed agent's boot exited $status (0 = a decision from the server, verified)"
fi
grep -q WEIGHTPATH_ENGINE_ARGS "$work/agent/run/engine.env" || fail "no engine.env handed over"
echo "weightpath-agent boot from the installed layout: ok"
check_dlopened "$work/ld-debug"/*
grep -q 'libcurl.so.4.*dynamically loaded' "$work/ld-debug"/boot.* ||
  fail "the boot downloaded without loading libcurl.so.4: the checks here no longer see it"

# A root without libcurl: the agent's package and the libraries it links
# (what its shlibdeps Depends installs), nothing else. The boot cannot
# download, hands over the offline decision and exits 5, which
# weightpath-agent.service does not list in SuccessExitStatus.
if unshare -r true 2>/dev/null; then
  bare=$work/bare
  mkdir -p "$bare/usr/bin" "$bare/etc/weightpath"
  cp "$root/usr/bin/weightpath-agent" "$bare/usr/bin/"
  for library in $(ldd "$root/usr/bin/weightpath-agent" | awk '/=>/ {print $3} /^\t\/.*ld-linux/ {print $1}'); do
    mkdir -p "$bare$(dirname "$library")"
    cp -L "$library" "$bare$library"
  done
  [[ -z $(find "$bare" -name 'libcurl*') ]] || fail "libcurl is in the bare root"
  cp "$source_dir/examples/profiles/intel-sapphire-rapids.json" "$bare/profile.json"
  agent_config /var/lib/package-test package-test-bare >"$bare/etc/weightpath/agent.yaml"
  status=0
  WEIGHTPATH_HW_PROFILE=/profile.json unshare -r chroot "$bare" /usr/bin/weightpath-agent boot \
    --config /etc/weightpath/agent.yaml >"$work/bare.log" 2>&1 || status=$?
  if [[ $status -ne 5 ]] || ! grep -q 'cannot load libcurl.so.4' "$work/bare.log" ||
     ! grep -q 'install libcurl4' "$work/bare.log"; then
    cat "$work/bare.log" >&2
    fail "without libcurl the agent's boot exited $status (want 5, naming libcurl.so.4 and libcurl4)"
  fi
  grep -q '^SuccessExitStatus=3 4$' "$root/usr/lib/systemd/system/weightpath-agent.service" ||
    fail "the agent unit's SuccessExitStatus is not 3 4"
  echo "weightpath-agent boot in a root without libcurl: exit 5: $(grep -o 'this install cannot download.*' "$work/bare.log")"
else
  echo "packages_test: no user namespaces here: the root without libcurl is not tried"
fi
echo "packages_test: all three packages build, unpack and run"
