#include "server/config/server_config.h"

#include <string_view>
#include <utility>

#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/bounded_yaml.h"
#include "common/strict_yaml.h"
#include "common/status_macros.h"
#include "server/config/file_fingerprint.h"
#include "server/config/signed_catalog.h"
#include "spdlog/spdlog.h"
#include "yaml-cpp/yaml.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:50051",
          "gRPC address HOST:PORT (port 0 picks a free one); plaintext only on loopback unless "
          "--insecure");
ABSL_FLAG(std::string, metrics_listen, "127.0.0.1:9464",
          "Prometheus /metrics address HOST:PORT (port 0 picks a free one)");
ABSL_FLAG(std::string, policy, "", "Policy YAML file; empty serves the bundled default policy");
ABSL_FLAG(std::string, catalog, "",
          "Artifact catalog: a YAML file (unsigned), or a TUF repository directory "
          "(weightpathctl repo's REPO, or a directory of metadata files) verified against "
          "--catalog_root; empty serves the embedded demo catalog (unsigned)");
ABSL_FLAG(std::string, catalog_root, "",
          "With a repository --catalog: the trusted root.json to verify it from (the root "
          "devices are provisioned with, e.g. REPO/metadata/1.root.json); later roots are "
          "followed from the repository");
ABSL_FLAG(std::string, catalog_artifact_url, "",
          "With a repository --catalog: base URL of the artifact mirror; an artifact's uri is "
          "URL/TARGET_PATH");
ABSL_FLAG(std::string, catalog_default_model, "",
          "With a repository --catalog: the model of a request that names none (default: the "
          "only model the targets list)");
ABSL_FLAG(std::string, catalog_state_dir, "",
          "With a repository --catalog: where the trusted metadata is kept "
          "(catalog-trust-state.json), so a restart cannot be rolled back to older metadata; "
          "default: the directory of the --store sqlite:FILE");
ABSL_FLAG(std::string, timestamp_key, "",
          "With a repository --catalog: online ed25519 timestamp key (PKCS#8 PEM, mode 600 or "
          "400); the server re-signs timestamp.json once less than half of "
          "--timestamp_lifetime is left");
ABSL_FLAG(absl::Duration, timestamp_lifetime, absl::Hours(24),
          "Expiry of each timestamp.json the server signs with --timestamp_key, from the time "
          "it signs (checked every tenth of it, between 1s and 1m)");
ABSL_FLAG(std::string, log_format, "text", "text or json (one JSON object a line)");
ABSL_FLAG(std::string, log_level, "info", "trace, debug, info, warn or error");
ABSL_FLAG(absl::Duration, shutdown_grace, absl::Seconds(10),
          "How long in-flight calls may take to finish after SIGTERM/SIGINT");
ABSL_FLAG(absl::Duration, reload_interval, absl::Seconds(2),
          "How often the policy and catalog files are checked for changes; 0 disables polling "
          "(SIGHUP still reloads)");
ABSL_FLAG(std::string, tls_cert, "", "PEM server certificate chain (enables TLS)");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert");
ABSL_FLAG(std::string, client_ca, "",
          "PEM CA bundle: require client certificates signed by it (mutual TLS); a request's "
          "device_id must then match the certificate's CN or a SAN");
ABSL_FLAG(bool, insecure, false, "Allow plaintext gRPC on a non-loopback address");
ABSL_FLAG(std::string, store, "sqlite:weightpath-fleet.db",
          "Fleet store: sqlite:FILE (relative to the working directory), postgres://USER@HOST:"
          "PORT/DB (shared by replicas), or none (no device registry or fleet evidence)");
ABSL_FLAG(uint32_t, verified_min_devices, 3,
          "Distinct devices of one class and CPU model whose reports make a path verified");
ABSL_FLAG(absl::Duration, verification_window, absl::Hours(30 * 24),
          "How far back measurements count as verification evidence (e.g. 720h)");
ABSL_FLAG(double, regression_fraction, 0.8,
          "A decode tok/s below this fraction of the policy's figure for the same CPU and "
          "threads is flagged as a regression");
ABSL_FLAG(absl::Duration, devices_seen_window, absl::Hours(24),
          "Devices resolved within this window count in weightpath_devices_seen");
ABSL_FLAG(absl::Duration, fleet_refresh_interval, absl::Seconds(5),
          "How often the in-memory verification matrix and the devices-seen gauge are re-read "
          "from the store (an accepted measurement refreshes at once)");
ABSL_FLAG(absl::Duration, devices_seen_refresh_interval, absl::Minutes(1),
          "How often weightpath_devices_seen is recounted from the store (a count reads every "
          "device's sighting)");
ABSL_FLAG(absl::Duration, resolve_interval, absl::Hours(1),
          "How often a device is told to resolve again when no live rollout selects it "
          "(resolve_interval_seconds; the agent adds +-20% jitter). 30s to 24h");
ABSL_FLAG(absl::Duration, rollout_resolve_interval, absl::Minutes(5),
          "The shorter interval while a rollout that selects a device is live, unless the rollout "
          "sets stage_resolve_interval_seconds. 30s to --resolve_interval");
ABSL_FLAG(absl::Duration, failed_build_retry_interval, absl::Hours(1),
          "How long a device whose assigned build failed (its bytes were refused or the engine "
          "did not start on it) waits before trying the same build again, doubling after each "
          "further failure up to 16x (failed_build_retry_seconds). 0: not until the answer "
          "changes; else 1m to 24h");
ABSL_FLAG(absl::Duration, drift_persistent_after, absl::Hours(1),
          "A device running another build than assigned for this long counts in "
          "weightpath_devices_drifted_persistent (the WeightpathDeviceDriftPersists alert)");
ABSL_FLAG(absl::Duration, audit_retention, absl::Hours(90 * 24),
          "Audit events older than this are deleted (0: kept whatever their age)");
ABSL_FLAG(int64_t, audit_max_events, 200000,
          "Beyond this many audit events the oldest are deleted (0: no bound on the count)");
ABSL_FLAG(int64_t, registry_queue_capacity, 50000,
          "Device records waiting for the registry; when full a resolve is still answered and "
          "its record dropped (counted in weightpath_fleet_records_dropped_total)");
ABSL_FLAG(int64_t, registry_queue_max_mb, 256,
          "MiB of device records (each with the profile the device sent, up to 16 KiB) waiting "
          "for the registry; beyond it a resolve is still answered and its record dropped and "
          "counted, like past --registry_queue_capacity. 1 to 65536");
ABSL_FLAG(int64_t, registry_batch_size, 10000,
          "Device records written to the registry per transaction (larger batches rewrite "
          "fewer store pages per record)");
ABSL_FLAG(absl::Duration, registry_flush_period, absl::Seconds(1),
          "Longest a device record waits in the queue before the registry writes it (a batch "
          "is written sooner once --registry_batch_size records wait)");
ABSL_FLAG(double, device_rate_limit, 0,
          "Calls a second each device may make to ResolveWeightPath, ReportMeasurement and "
          "ReportOutcome together, beyond its burst; more are refused RESOURCE_EXHAUSTED with "
          "grpc-retry-pushback-ms. 0: no per-device limit");
ABSL_FLAG(double, device_rate_burst, 0,
          "Calls a device may make back to back before --device_rate_limit applies; 0: one "
          "second's worth (at least 1)");
ABSL_FLAG(int64_t, max_inflight_device_calls, 1000,
          "Device calls served at once, all devices together (a report counts until its store "
          "work answered); more are refused RESOURCE_EXHAUSTED with grpc-retry-pushback-ms. 0: "
          "no limit");
ABSL_FLAG(absl::Duration, handshake_timeout, absl::Seconds(10),
          "A connection to the gRPC port must finish its TLS handshake and send its HTTP/2 "
          "SETTINGS within this long, or it is closed");
ABSL_FLAG(int64_t, max_concurrent_streams, 100,
          "Calls one gRPC connection may have open at once (HTTP/2 MAX_CONCURRENT_STREAMS)");
ABSL_FLAG(int64_t, max_connections, 0,
          "Connections the gRPC port holds at once, about (they are counted by descriptor); "
          "more are closed as soon as accepted. 0: as many as the descriptor limit allows, "
          "less a reserve of 1/16 of it (at most 1024) kept for the server's own use");
ABSL_FLAG(int64_t, grpc_memory_quota_mb, 256,
          "Memory (MiB) gRPC's transport may hold for all connections together (what it "
          "has read and not yet delivered); beyond it idle connections are sent GOAWAY and "
          "open calls cancelled one at a time");
ABSL_FLAG(absl::Duration, max_connection_idle, absl::Minutes(5),
          "A gRPC connection with no call open for this long is closed (GOAWAY)");
ABSL_FLAG(absl::Duration, max_connection_age, absl::Minutes(30),
          "A gRPC connection is asked to go away after this long; its open calls get 30s more "
          "(clients reconnect by themselves)");
ABSL_FLAG(absl::Duration, listener_check_interval, absl::Seconds(10),
          "How often the server proves its gRPC port still accepts connections; after 3 "
          "failed checks in a row it reports NOT_SERVING and exits 1 so its supervisor "
          "restarts it. 0: no check");
ABSL_FLAG(std::string, admin_token_file, "",
          "File holding the operator bearer token FleetAdmin calls must send (without mTLS)");
ABSL_FLAG(std::string, admin_identity, "",
          "Under mTLS, what marks an operator certificate: ou=NAME or uri_prefix=PREFIX");
ABSL_FLAG(std::string, replica_name, "",
          "This replica's name in the audit trail (AuditEvent.replica), 1 to 128 printable "
          "ASCII characters without spaces, e.g. the pod name; empty: HOSTNAME/HOST:PORT, "
          "the host name and the bound gRPC address, so replicas on one host differ");
ABSL_FLAG(std::string, config, "",
          "YAML file of flag values (keys named like the flags; the command line wins) and the "
          "operators list: each {name, role: viewer|operator|admin, token_file or certificate}");

namespace weightpath::server {
namespace {

constexpr absl::string_view kConfigurableFlags[] = {
    "listen",          "metrics_listen", "policy",     "catalog",   "log_format",
    "log_level",       "shutdown_grace", "reload_interval", "tls_cert", "tls_key",
    "client_ca",       "insecure",       "store",      "verified_min_devices",
    "verification_window", "regression_fraction", "devices_seen_window",
    "fleet_refresh_interval", "devices_seen_refresh_interval", "resolve_interval", "rollout_resolve_interval", "failed_build_retry_interval", "drift_persistent_after", "audit_retention", "audit_max_events", "registry_queue_capacity", "registry_queue_max_mb", "registry_batch_size", "registry_flush_period",
    "device_rate_limit", "device_rate_burst", "max_inflight_device_calls",
    "handshake_timeout", "max_concurrent_streams", "max_connections", "grpc_memory_quota_mb",
    "max_connection_idle", "max_connection_age", "listener_check_interval",
    "admin_token_file", "admin_identity", "catalog_root", "catalog_artifact_url",
    "catalog_default_model", "catalog_state_dir", "timestamp_key", "timestamp_lifetime",
    "replica_name"};

bool IsConfigurable(absl::string_view name) {
  for (absl::string_view known : kConfigurableFlags) {
    if (known == name) return true;
  }
  return false;
}

// A server config is a flat map of flag values: a megabyte of text and ten
// thousand nodes are far beyond any real one.
constexpr size_t kMaxConfigBytes = 1024 * 1024;
constexpr size_t kMaxConfigNodes = 10000;

// The `operators` list: a mapping per identity, each key known, each role
// one of the three, exactly one credential.
absl::StatusOr<std::vector<OperatorIdentityConfig>> ReadOperators(const yaml::Reader& reader,
                                                                  const yaml::Entry& list) {
  ASSIGN_OR_RETURN(
      const std::vector<yaml::Entry> items,
      yaml::ReadList(reader, list, "a list of {name, role, token_file | certificate}"));
  std::vector<OperatorIdentityConfig> operators;
  for (const yaml::Entry& item : items) {
    OperatorIdentityConfig entry;
    entry.where =
        absl::StrCat(reader.source_name(), ":", item.value.Mark().line + 1, ": ", item.path);
    ASSIGN_OR_RETURN(const yaml::Map map,
                     yaml::Map::Read(reader, item, {"name", "role", "token_file", "certificate"}));
    for (const yaml::Entry& field : map.entries()) {
      std::string* slot = field.key == "name"         ? &entry.name
                          : field.key == "role"       ? &entry.role
                          : field.key == "token_file" ? &entry.token_file
                                                      : &entry.certificate;
      ASSIGN_OR_RETURN(*slot, yaml::ReadScalar(reader, field, "a non-empty string"));
      if (slot->empty()) return yaml::Fault(reader, field, "must not be empty");
    }
    if (entry.name.empty()) {
      return yaml::Fault(reader, item, "needs a name (for logs and the audit trail)");
    }
    if (entry.role != "viewer" && entry.role != "operator" && entry.role != "admin") {
      return yaml::Fault(
          reader, item,
          absl::StrCat("role \"", entry.role, "\" must be viewer, operator or admin"));
    }
    if (entry.token_file.empty() == entry.certificate.empty()) {
      return yaml::Fault(reader, item, "needs exactly one of token_file and certificate");
    }
    operators.push_back(std::move(entry));
  }
  return operators;
}

absl::Status ApplyConfigFile(const std::string& path, const std::set<std::string>& on_command_line,
                             std::vector<OperatorIdentityConfig>* operators) {
  ASSIGN_OR_RETURN(const std::string text, ReadWholeFile(path, kMaxConfigBytes));
  yaml::Limits limits;
  limits.max_bytes = kMaxConfigBytes;
  limits.max_nodes = kMaxConfigNodes;
  ASSIGN_OR_RETURN(const YAML::Node root, yaml::LoadBounded(text, path, limits));
  if (root.IsNull()) return absl::OkStatus();
  if (!root.IsMap()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": must be a mapping of flag names"));
  }
  const yaml::Reader reader(path);
  ASSIGN_OR_RETURN(const yaml::Map map, yaml::Map::ReadAnyKeys(reader, root, ""));
  for (const yaml::Entry& entry : map.entries()) {
    if (entry.key == "operators") {
      ASSIGN_OR_RETURN(*operators, ReadOperators(reader, entry));
      continue;
    }
    if (!IsConfigurable(entry.key)) return yaml::UnknownKey(reader, entry, kConfigurableFlags);
    ASSIGN_OR_RETURN(const std::string value,
                     yaml::ReadScalar(reader, entry, "a single value"));
    // Empty would read as "not set" and quietly fall back to the default.
    if (entry.key == "replica_name" && value.empty()) {
      return yaml::Fault(reader, entry, "must not be empty: leave it out for HOSTNAME/HOST:PORT");
    }
    if (on_command_line.count(entry.key) > 0) continue;
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(entry.key);
    std::string error;
    if (flag == nullptr || !flag->ParseFrom(value, &error)) {
      return yaml::Fault(reader, entry, error);
    }
  }
  return absl::OkStatus();
}

bool IsKnownLogLevel(absl::string_view level) {
  for (absl::string_view known : {"trace", "debug", "info", "warn", "error"}) {
    if (level == known) return true;
  }
  return false;
}

}  // namespace

std::set<std::string> FlagNamesOnCommandLine(int argc, char** argv) {
  std::set<std::string> names;
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (arg == "--") break;
    if (!absl::ConsumePrefix(&arg, "--") && !absl::ConsumePrefix(&arg, "-")) continue;
    arg = arg.substr(0, arg.find('='));
    names.emplace(arg);
    if (absl::ConsumePrefix(&arg, "no")) names.emplace(arg);
  }
  return names;
}

absl::StatusOr<ServerConfig> ServerConfigFromFlags(const std::set<std::string>& on_command_line) {
  ServerConfig config;
  const std::string config_path = absl::GetFlag(FLAGS_config);
  if (!config_path.empty()) {
    RETURN_IF_ERROR(ApplyConfigFile(config_path, on_command_line, &config.operators));
  }

  config.listen = absl::GetFlag(FLAGS_listen);
  config.metrics_listen = absl::GetFlag(FLAGS_metrics_listen);
  config.policy_path = absl::GetFlag(FLAGS_policy);
  config.catalog_path = absl::GetFlag(FLAGS_catalog);
  config.catalog_root_path = absl::GetFlag(FLAGS_catalog_root);
  config.catalog_artifact_url = absl::GetFlag(FLAGS_catalog_artifact_url);
  config.catalog_default_model = absl::GetFlag(FLAGS_catalog_default_model);
  config.catalog_state_dir = absl::GetFlag(FLAGS_catalog_state_dir);
  config.timestamp_key_path = absl::GetFlag(FLAGS_timestamp_key);
  config.timestamp_lifetime = absl::GetFlag(FLAGS_timestamp_lifetime);
  const std::string log_format = absl::GetFlag(FLAGS_log_format);
  if (log_format == "text") {
    config.log_format = LogFormat::kText;
  } else if (log_format == "json") {
    config.log_format = LogFormat::kJson;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--log_format=\"", log_format, "\" must be text or json"));
  }
  config.log_level = absl::GetFlag(FLAGS_log_level);
  config.shutdown_grace = absl::GetFlag(FLAGS_shutdown_grace);
  config.reload_interval = absl::GetFlag(FLAGS_reload_interval);
  config.tls_cert_path = absl::GetFlag(FLAGS_tls_cert);
  config.tls_key_path = absl::GetFlag(FLAGS_tls_key);
  config.client_ca_path = absl::GetFlag(FLAGS_client_ca);
  config.insecure = absl::GetFlag(FLAGS_insecure);
  config.store_url = absl::GetFlag(FLAGS_store);
  config.verified_min_devices = absl::GetFlag(FLAGS_verified_min_devices);
  config.verification_window = absl::GetFlag(FLAGS_verification_window);
  config.regression_fraction = absl::GetFlag(FLAGS_regression_fraction);
  config.devices_seen_window = absl::GetFlag(FLAGS_devices_seen_window);
  config.fleet_refresh_interval = absl::GetFlag(FLAGS_fleet_refresh_interval);
  config.registry_queue_capacity = absl::GetFlag(FLAGS_registry_queue_capacity);
  config.registry_queue_max_mb = absl::GetFlag(FLAGS_registry_queue_max_mb);
  config.registry_batch_size = absl::GetFlag(FLAGS_registry_batch_size);
  config.devices_seen_refresh_interval = absl::GetFlag(FLAGS_devices_seen_refresh_interval);
  config.failed_build_retry_interval = absl::GetFlag(FLAGS_failed_build_retry_interval);
  config.drift_persistent_after = absl::GetFlag(FLAGS_drift_persistent_after);
  config.resolve_interval = absl::GetFlag(FLAGS_resolve_interval);
  config.rollout_resolve_interval = absl::GetFlag(FLAGS_rollout_resolve_interval);
  config.audit_retention = absl::GetFlag(FLAGS_audit_retention);
  config.audit_max_events = absl::GetFlag(FLAGS_audit_max_events);
  config.registry_flush_period = absl::GetFlag(FLAGS_registry_flush_period);
  config.device_rate_limit = absl::GetFlag(FLAGS_device_rate_limit);
  config.device_rate_burst = absl::GetFlag(FLAGS_device_rate_burst);
  config.max_inflight_device_calls = absl::GetFlag(FLAGS_max_inflight_device_calls);
  config.handshake_timeout = absl::GetFlag(FLAGS_handshake_timeout);
  config.max_concurrent_streams = absl::GetFlag(FLAGS_max_concurrent_streams);
  config.max_connections = absl::GetFlag(FLAGS_max_connections);
  config.grpc_memory_quota_mb = absl::GetFlag(FLAGS_grpc_memory_quota_mb);
  config.max_connection_idle = absl::GetFlag(FLAGS_max_connection_idle);
  config.max_connection_age = absl::GetFlag(FLAGS_max_connection_age);
  config.listener_check_interval = absl::GetFlag(FLAGS_listener_check_interval);
  config.admin_token_file = absl::GetFlag(FLAGS_admin_token_file);
  config.admin_identity = absl::GetFlag(FLAGS_admin_identity);
  config.replica_name = absl::GetFlag(FLAGS_replica_name);
  // An empty value given on purpose (e.g. an unset variable in a unit file)
  // would silently become the default name; the caller meant a name.
  if (on_command_line.count("replica_name") > 0 && config.replica_name.empty()) {
    return absl::InvalidArgumentError(
        "--replica_name is empty: leave the flag out for HOSTNAME/HOST:PORT, or give this "
        "replica a name");
  }
  RETURN_IF_ERROR(ValidateServerConfig(config));
  return config;
}

absl::Status ValidateServerConfig(const ServerConfig& config) {
  if (config.listen.empty()) return absl::InvalidArgumentError("--listen must be HOST:PORT");
  if (config.metrics_listen.empty()) {
    return absl::InvalidArgumentError("--metrics_listen must be HOST:PORT");
  }
  if (!IsKnownLogLevel(config.log_level)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--log_level=\"", config.log_level, "\" must be trace, debug, info, warn or error"));
  }
  if (config.shutdown_grace < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--shutdown_grace must not be negative");
  }
  if (config.reload_interval < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--reload_interval must not be negative");
  }
  const bool repository = IsCatalogRepository(config.catalog_path);
  for (const auto& [flag, value] :
       {std::pair<absl::string_view, const std::string*>{"catalog_root", &config.catalog_root_path},
        {"catalog_artifact_url", &config.catalog_artifact_url},
        {"catalog_default_model", &config.catalog_default_model},
        {"catalog_state_dir", &config.catalog_state_dir},
        {"timestamp_key", &config.timestamp_key_path}}) {
    if (!value->empty() && !repository) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--", flag, " needs --catalog to be a TUF repository directory (--catalog=",
          config.catalog_path.empty() ? "<embedded demo catalog>" : config.catalog_path,
          " is not a directory)"));
    }
  }
  if (config.timestamp_lifetime < absl::Seconds(2) || config.timestamp_lifetime > absl::Hours(24 * 366)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--timestamp_lifetime=", absl::FormatDuration(config.timestamp_lifetime),
        " must be between 2s and 8784h"));
  }
  if (config.tls_cert_path.empty() != config.tls_key_path.empty()) {
    return absl::InvalidArgumentError("--tls_cert and --tls_key must be given together");
  }
  if (!config.client_ca_path.empty() && config.tls_cert_path.empty()) {
    return absl::InvalidArgumentError("--client_ca needs --tls_cert and --tls_key");
  }
  if (config.store_url.empty()) {
    return absl::InvalidArgumentError("--store must be sqlite:FILE, postgres://... or none");
  }
  if (config.verified_min_devices == 0) {
    return absl::InvalidArgumentError("--verified_min_devices must be at least 1");
  }
  if (config.verification_window <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--verification_window must be positive");
  }
  if (!(config.regression_fraction > 0 && config.regression_fraction <= 1)) {
    return absl::InvalidArgumentError("--regression_fraction must be in (0, 1]");
  }
  if (config.devices_seen_window <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--devices_seen_window must be positive");
  }
  if (config.fleet_refresh_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--fleet_refresh_interval must be positive");
  }
  // Below the floor the server never answers anyway; past a day a device
  // would miss a whole timestamp lifetime and most rollouts' stages.
  if (config.resolve_interval < absl::Seconds(30) || config.resolve_interval > absl::Hours(24)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--resolve_interval: ", absl::FormatDuration(config.resolve_interval),
        " is outside 30s..24h (how often a device resolves when no rollout selects it)"));
  }
  if (config.rollout_resolve_interval < absl::Seconds(30) ||
      config.rollout_resolve_interval > config.resolve_interval) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--rollout_resolve_interval: ", absl::FormatDuration(config.rollout_resolve_interval),
        " is outside 30s..--resolve_interval (", absl::FormatDuration(config.resolve_interval),
        "): it is the shorter interval while a rollout selects the device"));
  }
  if (config.devices_seen_refresh_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--devices_seen_refresh_interval must be positive");
  }
  if (config.failed_build_retry_interval != absl::ZeroDuration() &&
      (config.failed_build_retry_interval < absl::Minutes(1) ||
       config.failed_build_retry_interval > absl::Hours(24))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--failed_build_retry_interval: ", absl::FormatDuration(config.failed_build_retry_interval),
        " is outside 1m..24h (0 turns retries off)"));
  }
  if (config.drift_persistent_after <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--drift_persistent_after must be positive");
  }
  if (config.audit_retention < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--audit_retention must not be negative (0: no age limit)");
  }
  if (config.audit_max_events < 0) {
    return absl::InvalidArgumentError(absl::StrCat("--audit_max_events=", config.audit_max_events,
                                                   " must not be negative (0: no count limit)"));
  }
  if (config.registry_queue_capacity < 1 || config.registry_queue_capacity > 10'000'000) {
    return absl::InvalidArgumentError(absl::StrCat("--registry_queue_capacity=",
                                                   config.registry_queue_capacity,
                                                   " must be between 1 and 10000000"));
  }
  if (config.registry_queue_max_mb < 1 || config.registry_queue_max_mb > 65536) {
    return absl::InvalidArgumentError(absl::StrCat("--registry_queue_max_mb=",
                                                   config.registry_queue_max_mb,
                                                   " must be between 1 and 65536"));
  }
  if (config.registry_batch_size < 1 || config.registry_batch_size > config.registry_queue_capacity) {
    return absl::InvalidArgumentError(absl::StrCat("--registry_batch_size=", config.registry_batch_size,
                                                   " must be between 1 and --registry_queue_capacity"));
  }
  if (config.registry_flush_period <= absl::ZeroDuration() ||
      config.registry_flush_period > absl::Minutes(1)) {
    return absl::InvalidArgumentError(absl::StrCat("--registry_flush_period=",
                                                   absl::FormatDuration(config.registry_flush_period),
                                                   " must be above 0 and at most 1m"));
  }
  // A rate below one call a day is a typo, not a limit; above a million a
  // second it limits nothing.
  if (!(config.device_rate_limit == 0 ||
        (config.device_rate_limit >= 1.0 / 86400 && config.device_rate_limit <= 1e6))) {
    return absl::InvalidArgumentError(absl::StrCat("--device_rate_limit=", config.device_rate_limit,
                                                   " must be 0 (off) or between 1/86400 and 1e6"));
  }
  if (!(config.device_rate_burst == 0 ||
        (config.device_rate_burst >= 1 && config.device_rate_burst <= 1e6))) {
    return absl::InvalidArgumentError(absl::StrCat("--device_rate_burst=", config.device_rate_burst,
                                                   " must be 0 (one second's worth) or between "
                                                   "1 and 1e6"));
  }
  if (config.max_inflight_device_calls < 0 || config.max_inflight_device_calls > 10'000'000) {
    return absl::InvalidArgumentError(absl::StrCat("--max_inflight_device_calls=",
                                                   config.max_inflight_device_calls,
                                                   " must be between 0 (off) and 10000000"));
  }
  // The connection limits: zero or negative would refuse every client, and
  // beyond these bounds a value no longer limits anything.
  if (config.handshake_timeout < absl::Milliseconds(100) ||
      config.handshake_timeout > absl::Minutes(10)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--handshake_timeout=", absl::FormatDuration(config.handshake_timeout),
        " must be between 100ms and 10m"));
  }
  if (config.max_concurrent_streams < 1 || config.max_concurrent_streams > 100000) {
    return absl::InvalidArgumentError(absl::StrCat("--max_concurrent_streams=",
                                                   config.max_concurrent_streams,
                                                   " must be between 1 and 100000"));
  }
  if (config.max_connections < 0 || config.max_connections > 10'000'000) {
    return absl::InvalidArgumentError(absl::StrCat("--max_connections=", config.max_connections,
                                                   " must be between 0 (the descriptor limit) "
                                                   "and 10000000"));
  }
  if (config.grpc_memory_quota_mb < 16 || config.grpc_memory_quota_mb > 1024 * 1024) {
    return absl::InvalidArgumentError(absl::StrCat("--grpc_memory_quota_mb=",
                                                   config.grpc_memory_quota_mb,
                                                   " must be between 16 and 1048576"));
  }
  for (const auto& [flag, value] :
       {std::pair<absl::string_view, absl::Duration>{"max_connection_idle",
                                                     config.max_connection_idle},
        {"max_connection_age", config.max_connection_age}}) {
    // gRPC takes these as milliseconds in an int: past ~596h they wrapped
    // negative, and every connection got GOAWAY at once.
    if (value < absl::Seconds(1) || value > absl::Hours(24 * 24)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--", flag, "=", absl::FormatDuration(value), " must be between 1s and 576h (24 days)"));
    }
  }
  if (config.listener_check_interval != absl::ZeroDuration() &&
      (config.listener_check_interval < absl::Milliseconds(100) ||
       config.listener_check_interval > absl::Minutes(10))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--listener_check_interval=", absl::FormatDuration(config.listener_check_interval),
        " must be 0 (off) or between 100ms and 10m"));
  }
  RETURN_IF_ERROR(ValidateReplicaName(config.replica_name));
  return absl::OkStatus();
}

absl::Status ValidateReplicaName(absl::string_view name) {
  if (name.empty()) return absl::OkStatus();  // the default is made at start
  if (name.size() > kMaxReplicaNameBytes) {
    return absl::InvalidArgumentError(absl::StrCat("--replica_name is ", name.size(),
                                                   " bytes long; at most ", kMaxReplicaNameBytes));
  }
  for (const char c : name) {
    if (c <= ' ' || c > '~') {
      return absl::InvalidArgumentError(absl::StrCat(
          "--replica_name=\"", absl::CHexEscape(name),
          "\" must be printable ASCII characters without spaces (it names this replica in "
          "the audit trail)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace weightpath::server
