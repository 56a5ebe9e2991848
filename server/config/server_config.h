// Everything weightpath-server is configured with. Command-line flags are
// the interface other programs drive; --config FILE may add values (YAML,
// keys named like the flags), and a flag given on the command line wins.
#pragma once

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace weightpath::server {

enum class LogFormat { kText, kJson };

// One operator identity from the --config file's `operators` list, mapped
// to a role (server/security/operator_auth.h checks and uses it):
//   operators:
//     - {name: alice, role: viewer, token_file: /etc/weightpath/alice.token}
//     - {name: release, role: operator, certificate: "ou=release-team"}
struct OperatorIdentityConfig {
  std::string name;
  std::string role;         // viewer, operator or admin
  std::string token_file;   // exactly one of token_file and certificate
  std::string certificate;  // ou=NAME or uri_prefix=PREFIX
  std::string where;        // "FILE:LINE operators[I]", for errors
};

struct ServerConfig {
  std::string listen = "127.0.0.1:50051";
  std::string metrics_listen = "127.0.0.1:9464";
  std::string policy_path;   // empty: the bundled default policy
  std::string catalog_path;  // empty: the embedded demo catalog; a directory: a TUF repository
  // A TUF repository catalog (server/signed_catalog.h).
  std::string catalog_root_path;
  std::string catalog_artifact_url;
  std::string catalog_default_model;
  std::string catalog_state_dir;  // empty: beside the sqlite:FILE store
  std::string timestamp_key_path;
  absl::Duration timestamp_lifetime = absl::Hours(24);
  LogFormat log_format = LogFormat::kText;
  std::string log_level = "info";
  absl::Duration shutdown_grace = absl::Seconds(10);
  absl::Duration reload_interval = absl::Seconds(2);
  std::string tls_cert_path;
  std::string tls_key_path;
  std::string client_ca_path;
  bool insecure = false;

  // Fleet registry and verification evidence (server/fleet_state.h).
  // "sqlite:FILE", "postgres://..." or "none" (no registry: resolves answer
  // from the policy alone and the fleet RPCs refuse).
  std::string store_url = "sqlite:weightpath-fleet.db";
  uint32_t verified_min_devices = 3;
  absl::Duration verification_window = absl::Hours(30 * 24);
  double regression_fraction = 0.8;
  absl::Duration devices_seen_window = absl::Hours(24);
  absl::Duration fleet_refresh_interval = absl::Seconds(5);
  absl::Duration devices_seen_refresh_interval = absl::Minutes(1);
  // What devices are told (deploy/resolve_interval.h): resolve_interval
  // when no live rollout selects them, rollout_resolve_interval while one
  // does (unless the rollout sets its own).
  absl::Duration resolve_interval = absl::Hours(1);
  absl::Duration rollout_resolve_interval = absl::Minutes(5);
  // ResolveWeightPathResponse.failed_build_retry_seconds: how long a device
  // whose build failed waits before trying it again (0: only when the
  // answer changes).
  absl::Duration failed_build_retry_interval = absl::Hours(1);
  // A device drifting (running another build than assigned) this long
  // counts in weightpath_devices_drifted_persistent.
  absl::Duration drift_persistent_after = absl::Hours(1);
  // Audit retention (FleetOptions); 0 turns each bound off.
  absl::Duration audit_retention = absl::Hours(90 * 24);
  int64_t audit_max_events = 200000;
  int64_t registry_queue_capacity = 50000;  // store::WriteBehindOptions
  int64_t registry_queue_max_mb = 256;      // its max_bytes, in MiB
  int64_t registry_batch_size = 10000;
  absl::Duration registry_flush_period = absl::Seconds(1);
  // Overload guards on the device RPCs (server/device_call_limits.h); 0 turns
  // each off.
  double device_rate_limit = 0;
  double device_rate_burst = 0;  // 0: one second's worth of calls
  int64_t max_inflight_device_calls = 1000;
  // What one unauthenticated peer may hold on the gRPC port (server.cc's
  // builder, README "Connections and memory"): a deadline for the TLS
  // handshake and the client's HTTP/2 SETTINGS, streams per connection, the
  // memory gRPC's transport may use before it cancels streams, and how long a
  // connection may stay idle or open at all.
  absl::Duration handshake_timeout = absl::Seconds(10);
  int64_t max_concurrent_streams = 100;
  int64_t max_connections = 0;  // 0: as many as the descriptor limit allows
  int64_t grpc_memory_quota_mb = 256;
  absl::Duration max_connection_idle = absl::Minutes(5);
  absl::Duration max_connection_age = absl::Minutes(30);
  // How often the gRPC port is proved to accept (server/listener_watchdog.h);
  // zero turns the check off. Off here, on (10s) from the flag: a deaf port
  // makes the process signal itself to stop, which only the binary's main()
  // should ever arrange, never a test that runs a server in its own process.
  absl::Duration listener_check_interval = absl::ZeroDuration();
  // Operator identity for FleetAdmin (server/operator_auth.h).
  std::string admin_token_file;
  std::string admin_identity;
  std::vector<OperatorIdentityConfig> operators;  // only from --config
  // AuditEvent.replica; empty: HOSTNAME/HOST:PORT of the bound gRPC port
  // (server.cc), so that two replicas on one host are told apart.
  std::string replica_name;
};

inline constexpr size_t kMaxReplicaNameBytes = 128;

// Names of the flags present in argv (as --name, --name=value, -name, or
// --noname for booleans), before absl parses them.
std::set<std::string> FlagNamesOnCommandLine(int argc, char** argv);

// Applies --config (if set) under the command line, then validates the
// result. INVALID_ARGUMENT names the flag or the config file:line.
absl::StatusOr<ServerConfig> ServerConfigFromFlags(const std::set<std::string>& on_command_line);

// Checks values that do not depend on where they came from.
absl::Status ValidateServerConfig(const ServerConfig& config);

// --replica_name: empty (the default is made at start), or 1 to
// kMaxReplicaNameBytes printable ASCII characters without spaces; the
// error names the flag.
absl::Status ValidateReplicaName(absl::string_view name);

}  // namespace weightpath::server
