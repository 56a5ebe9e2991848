# Sourced by the bench scripts that boot agents against a real server: the
# pieces they share. Each caller has its own scratch directory in $work and
# stops what it started in its own cleanup.

# Starts weightpath-server ($1, the binary) on catalog $2, on loopback ports
# it picks, without a store and without reloads (a bench changes catalogs by
# restarting). Sets server_pid and address (the gRPC host:port); stops the
# bench, showing the server's stderr, if it does not start within 60 s.
bench_start_server() {
  "$1" --listen=127.0.0.1:0 --metrics_listen=127.0.0.1:0 --catalog="$2" --store=none \
    --reload_interval=0s >"$work/server.out" 2>"$work/server.err" &
  server_pid=$!
  for _ in $(seq 1 600); do grep -q '^listening ' "$work/server.out" 2>/dev/null && break; sleep 0.1; done
  address=$(sed -n 's/^listening grpc=\([^ ]*\) .*/\1/p' "$work/server.out")
  [[ -n "$address" ]] || { echo "server did not start:" >&2; cat "$work/server.err" >&2; exit 1; }
}

# The device every bench boots: an x86 server with AMX (the default policy
# gives it w4a8-amx), exported as the agent's WEIGHTPATH_HW_PROFILE so no
# bench measures the probe.
bench_use_amx_profile() {
  cat >"$work/profile.json" <<'JSON'
{"arch": "x86_64", "cpu_model": "bench", "cpu_flags": ["avx2", "avx512f", "amx_bf16", "amx_tile", "amx_int8"],
 "n_logical": 8, "n_physical": 4, "numa_nodes": 1, "ram_total_bytes": 34359738368,
 "accelerator": "none", "supports_bf16": true, "host_os": "linux"}
JSON
  export WEIGHTPATH_HW_PROFILE=$work/profile.json
}
