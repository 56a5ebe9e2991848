#!/usr/bin/env bash
# Installs the Node interop suite's packages exactly as package-lock.json pins
# them (npm ci), into tests/interop/node_modules. Kept between runs: a second
# run with the same package.json and lock does nothing, so only the first run
# after a change needs the npm registry.
set -euo pipefail
cd "$(dirname "$0")"
# Two test runs at once must not both rebuild node_modules.
exec 9<.
flock 9
stamp=node_modules/.weightpath-installed
wanted=$(cat package.json package-lock.json | sha256sum | cut -d' ' -f1)
if [[ -f $stamp && $(<"$stamp") == "$wanted" ]]; then
  exit 0
fi
# --ignore-scripts: the suite needs no package's install script to run.
npm ci --ignore-scripts --no-audit --no-fund --prefer-offline
echo "$wanted" >"$stamp"
