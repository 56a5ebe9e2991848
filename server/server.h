// One running weightpath-server: the gRPC port (WeightPath, health, and
// reflection when the binary links it), the metrics port, and the reload
// watcher, started and stopped together.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/server.h"
#include "prometheus/exposer.h"
#include "server/config_watcher.h"
#include "server/grpc_listener.h"
#include "server/listener_watchdog.h"
#include "server/timestamp_signer.h"
#include "server/api/fleet_admin_service.h"
#include "server/fleet/fleet_queries.h"
#include "server/fleet/fleet_state.h"
#include "server/security/operator_auth.h"
#include "server/security/tls_reloader.h"
#include "server/observability/certificate_expiry.h"
#include "server/observability/metrics.h"
#include "server/config/policy_snapshot.h"
#include "server/rollout/rollout_admin.h"
#include "server/rollout/rollout_cache.h"
#include "server/rollout/rollout_metrics.h"
#include "server/rollout/rollout_reconciler.h"
#include "server/config/server_config.h"
#include "server/fleet/store_executor.h"
#include "server/api/weightpath_service.h"

namespace weightpath::server {

// Big enough for any valid profile (thousands of CPU flags included), small
// enough that a flood of huge messages cannot exhaust memory.
inline constexpr int kMaxReceiveMessageBytes = 64 * 1024;

inline constexpr char kWeightPathServiceName[] = "weightpath.v1.WeightPath";

class WeightPathServer {
 public:
  // Loads policy and catalog, binds both ports, and reports SERVING. Errors
  // name the flag at fault (--listen, --metrics_listen, --policy, ...).
  static absl::StatusOr<std::unique_ptr<WeightPathServer>> Start(const ServerConfig& config);
  ~WeightPathServer();

  // HOST:PORT actually bound (port 0 in the config becomes the chosen port).
  const std::string& grpc_address() const { return grpc_address_; }
  const std::string& metrics_address() const { return metrics_address_; }

  // SIGHUP: the watcher's thread re-reads both files; returns at once, so
  // the signal loop stays free to take SIGTERM during a slow reload.
  void RequestReload();
  // Health turns NOT_SERVING, new calls are refused, in-flight calls get
  // until now + grace to finish; then everything stops.
  void Shutdown(absl::Duration grace);
  // Whether the listener watchdog found the gRPC port deaf and asked for the
  // shutdown (main() then exits 1, so that the process is restarted).
  bool listener_deaf() const { return listener_deaf_.load(); }

 private:
  explicit WeightPathServer(const ServerConfig& config);
  void OnListenerDeaf(const std::string& why);
  // The server's own actions in the audit trail (with a fleet store): a
  // policy load or refused reload, and the rollout driver's steps. Sets
  // the replica and bounds the text as for an operator's call.
  void RecordSystemEvent(v1::AuditEvent event);
  void RecordPolicyLoad(const PolicyLoad& load);

  const ServerConfig config_;
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<ServerMetrics> metrics_;
  std::shared_ptr<CertificateExpiry> certificate_expiry_;
  // With TLS; declared before grpc_server_ so that it, and the private
  // copies gRPC reads, go away only after the gRPC server.
  std::unique_ptr<TlsReloader> tls_;
  SnapshotHolder snapshots_;
  std::unique_ptr<ConfigWatcher> watcher_;
  std::unique_ptr<TimestampSigner> timestamp_signer_;  // with --timestamp_key only
  std::unique_ptr<FleetState> fleet_;  // null with --store=none
  std::unique_ptr<FleetQueries> fleet_queries_;
  std::unique_ptr<OperatorAuth> operator_auth_;
  // Runs the calls that wait on the store (server/api/store_call.h); outlives
  // the services, which hold it.
  // Devices' reports and operators' calls wait on the store in pools of
  // their own, so no number of operator reads can hold up a device's write.
  std::unique_ptr<StoreExecutor> device_store_executor_;
  std::unique_ptr<StoreExecutor> operator_store_executor_;
  std::unique_ptr<DeviceCallLimits> device_call_limits_;
  std::unique_ptr<FleetAdminService> fleet_admin_;
  std::unique_ptr<WeightPathService> service_;
  // Rollouts (with a fleet store): the cache resolves read, the operator
  // side behind FleetAdmin, and the reconcile loop.
  RolloutCache rollout_cache_;
  std::unique_ptr<RolloutMetrics> rollout_metrics_;
  std::unique_ptr<RolloutAdmin> rollout_admin_;
  std::unique_ptr<RolloutReconciler> rollout_reconciler_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::unique_ptr<grpc::Server> grpc_server_;
  std::string grpc_address_;
  std::string metrics_address_;
  std::string replica_name_;  // AuditEvent.replica
  bool shut_down_ = false;
  std::unique_ptr<GrpcListener> grpc_listener_;
  std::unique_ptr<ListenerWatchdog> listener_watchdog_;  // null with --listener_check_interval=0
  std::atomic<bool> listener_deaf_{false};
};

}  // namespace weightpath::server
