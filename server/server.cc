#include "server/server.h"

#include "server/api/rollout_explain.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <limits>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/clock.h"
#include "common/host_port.h"
#include "common/proto_time.h"
#include "common/status_macros.h"
#include "deploy/cohort_outcomes.h"
#include "deploy/resolve_interval.h"
#include "grpc/grpc.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/resource_quota.h"
#include "grpcpp/server_builder.h"
#include "server/api/audit_event.h"
#include "server/api/reflection_v1.h"
#include "server/security/admin_token.h"
#include "server/security/tls.h"
#include "store/call_deadline.h"
#include "store/store.h"
#include "store/store_url_text.h"
#include "spdlog/spdlog.h"

namespace weightpath::server {
namespace {

deploy::ResolveIntervalSettings ResolveIntervalsOf(const ServerConfig& config) {
  deploy::ResolveIntervalSettings intervals;
  intervals.steady = config.resolve_interval;
  intervals.during_rollout = config.rollout_resolve_interval;
  intervals.failed_build_retry = config.failed_build_retry_interval;
  return intervals;
}

// The store calls' workers, in two pools: devices' reports, and operators'
// calls. SQLite takes one writer at a time and the PostgreSQL pool (8
// connections) a few, so more threads would only queue inside the store. The
// operators' pool is the smaller: any viewer can send costly reads (a 10,000-
// event audit listing), and with their own two workers (and SQLite's read
// connection, store/sqlite_database.cc) those reads queue behind each other,
// never in front of a device's report. A burst beyond a queue is refused
// UNAVAILABLE at once rather than left to time out.
constexpr int kDeviceStoreWorkerThreads = 4;
constexpr size_t kDeviceStoreCallsQueued = 256;
constexpr int kOperatorStoreWorkerThreads = 2;
constexpr size_t kOperatorStoreCallsQueued = 64;
// The longest the server's own audit events (policy loads, the rollout
// driver's steps) may wait on the store.
constexpr absl::Duration kSystemAuditWriteDeadline = absl::Seconds(5);

// What an unauthenticated peer may hold on the gRPC port. gRPC 1.51 applies
// no limit of its own: unlimited streams, no memory quota, 120 s for the TLS
// handshake and two hours between keepalive pings (README, "Connections and
// memory", has the worst cases these leave).
void LimitConnections(const ServerConfig& config, grpc::ServerBuilder* builder) {
  // Validated well below INT_MAX ms (server_config.cc); clamped all the same,
  // since a wrapped value means "at once" to gRPC.
  auto milliseconds = [](absl::Duration duration) {
    return static_cast<int>(std::clamp<int64_t>(absl::ToInt64Milliseconds(duration), 0,
                                                std::numeric_limits<int>::max()));
  };
  // chttp2_server.cc: one deadline from accept() for the TLS handshake and
  // the client's first SETTINGS frame; past it the connection is closed.
  builder->AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS,
                              milliseconds(config.handshake_timeout));
  // Enforced once the client has acknowledged the server's SETTINGS (1.51's
  // parsing.cc compares with the acknowledged value), as every HTTP/2 client
  // does; README says what one that never acknowledges can still hold.
  builder->AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS,
                              static_cast<int>(config.max_concurrent_streams));
  builder->AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS,
                              milliseconds(config.max_connection_idle));
  // A call dripping its request a byte at a time is bounded by the age and
  // its grace; every call of this API answers within seconds.
  builder->AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS,
                              milliseconds(config.max_connection_age));
  builder->AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS, 30 * 1000);
  // Peers that vanished (a device powered off, a NAT entry dropped) give back
  // their descriptor within a few minutes rather than hours.
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 2 * 60 * 1000);
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 20 * 1000);
  // The BDP probe grows every stream's initial window towards 16 MiB while
  // memory is plentiful; requests here are at most 64 KiB, so the default
  // 64 KiB window is all a stream needs before it has a reader.
  builder->AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  // What chttp2 reads (its read slices, so every buffered message byte) is
  // charged to the quota; a call's first arena block is not. Over it, its
  // reclaimers send GOAWAY to idle connections and cancel streams one at a
  // time (RST_STREAM ENHANCE_YOUR_CALM). This is what bounds a message
  // announced as 2 GB: 1.51 opens the stream's window towards the announced
  // length and checks the size limit only once the message is whole, so it
  // cannot be refused at its length prefix.
  grpc::ResourceQuota quota("weightpath-grpc");
  quota.Resize(static_cast<size_t>(config.grpc_memory_quota_mb) << 20);
  builder->SetResourceQuota(quota);
}

// civetweb's defaults under prometheus-cpp give /metrics two threads and 30 s
// to read a request's header, so two connections dripping a byte at a time
// hold both threads and every scrape (the liveness probe in TLS mode) waits.
// A scraper sends its whole request at once: 3 s bounds a header (and the
// sending of an answer to a reader that does not read), and eight threads
// leave room for scrapes beside a few slow peers; the connections waiting
// for a thread are at most civetweb's queue (16), so the port cannot take
// more descriptors than that.
std::vector<std::string> MetricsListenerOptions(const std::string& listen) {
  return {"listening_ports", listen, "num_threads", "8", "request_timeout_ms", "3000",
          "connection_queue", "16", "enable_keep_alive", "no"};
}

// The server's own state (the trusted TUF metadata, the generated admin
// token) lives beside the SQLite file by default; with PostgreSQL or no
// store there is no obvious place, and a flag is asked for.
std::string DefaultCatalogStateDir(const std::string& store_url) {
  absl::string_view file = store_url;
  if (!absl::ConsumePrefix(&file, "sqlite:") || file.empty()) return "";
  const size_t slash = file.rfind('/');
  if (slash == absl::string_view::npos) return ".";
  return std::string(slash == 0 ? "/" : file.substr(0, slash));
}

// --admin_identity and --admin_token_file are one admin each; the
// operators of --config bring their own names and roles.
absl::StatusOr<std::vector<OperatorCredential>> OperatorCredentials(const ServerConfig& config) {
  std::vector<OperatorCredential> credentials;
  if (!config.admin_identity.empty()) {
    RETURN_IF_ERROR(ParseAdminIdentity(config.admin_identity).status());
    credentials.push_back({"admin", Role::kAdmin, "", config.admin_identity, "--admin_identity"});
  }
  if (!config.admin_token_file.empty()) {
    credentials.push_back({"admin", Role::kAdmin, config.admin_token_file, "", "--admin_token_file"});
  }
  for (const OperatorIdentityConfig& entry : config.operators) {
    std::optional<Role> role = ParseRole(entry.role);
    if (!role.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(entry.where, ": unknown role ", entry.role));
    }
    credentials.push_back({entry.name, *role, entry.token_file, entry.certificate,
                           absl::StrCat(entry.where, " ",
                                        entry.token_file.empty() ? "certificate" : "token_file")});
  }
  return credentials;
}

}  // namespace

WeightPathServer::WeightPathServer(const ServerConfig& config) : config_(config) {}

WeightPathServer::~WeightPathServer() { Shutdown(absl::ZeroDuration()); }

absl::StatusOr<std::unique_ptr<WeightPathServer>> WeightPathServer::Start(
    const ServerConfig& config) {
  RETURN_IF_ERROR(ValidateServerConfig(config));
  RETURN_IF_ERROR(CheckTransportPolicy(config));
  ASSIGN_OR_RETURN(ServerTransport transport, BuildServerCredentials(config));
  const std::shared_ptr<grpc::ServerCredentials> credentials = transport.credentials;

  std::unique_ptr<WeightPathServer> server(new WeightPathServer(config));
  server->registry_ = std::make_shared<prometheus::Registry>();
  server->metrics_ = std::make_unique<ServerMetrics>(server->registry_);
  ConfigSources sources{config.policy_path, config.catalog_path, nullptr};
  if (IsCatalogRepository(config.catalog_path)) {
    SignedCatalogOptions options;
    options.repository = config.catalog_path;
    options.trusted_root_path = config.catalog_root_path;
    options.artifact_base_url = config.catalog_artifact_url;
    options.default_model = config.catalog_default_model;
    options.state_dir = config.catalog_state_dir.empty() ? DefaultCatalogStateDir(config.store_url)
                                                         : config.catalog_state_dir;
    ASSIGN_OR_RETURN(sources.signed_catalog, SignedCatalogSource::Create(std::move(options)));
  }
  server->watcher_ = std::make_unique<ConfigWatcher>(sources, &server->snapshots_,
                                                     server->metrics_.get(), config.reload_interval);
  if (!config.timestamp_key_path.empty()) {
    ConfigWatcher* watcher = server->watcher_.get();
    TimestampSignerOptions options;
    options.key_path = config.timestamp_key_path;
    options.lifetime = config.timestamp_lifetime;
    ASSIGN_OR_RETURN(server->timestamp_signer_,
                     TimestampSigner::Create(options, sources.signed_catalog, server->metrics_.get(),
                                             [watcher] { watcher->RequestReload(); }));
    RETURN_IF_ERROR(server->timestamp_signer_->CheckKey(absl::Now()));
    // Before the first load: a timestamp that expired while the server was
    // down is renewed rather than refused. A failure here is reported by
    // the load itself if the repository really does not verify.
    absl::StatusOr<TimestampSigner::Outcome> renewed = server->timestamp_signer_->RunOnce(absl::Now());
    if (!renewed.ok()) {
      spdlog::warn("timestamp not re-signed at start: {}", renewed.status().ToString());
      server->metrics_->RecordTimestampSigned(false);
    } else if (*renewed == TimestampSigner::Outcome::kPublished) {
      server->metrics_->RecordTimestampSigned(true);
    }
  }
  RETURN_IF_ERROR(server->watcher_->LoadInitial());

  // Operator identities are checked before any port is bound: a bad
  // entry in --config is named whatever else holds the ports.
  const bool mutual_tls = !config.client_ca_path.empty();
  ASSIGN_OR_RETURN(std::vector<OperatorCredential> operator_credentials, OperatorCredentials(config));
  // Under mutual TLS only certificates admit operators, so a generated
  // token would admit no one.
  if (operator_credentials.empty() && !mutual_tls) {
    ASSIGN_OR_RETURN(const std::string token_file,
                     DefaultAdminTokenFile(DefaultCatalogStateDir(config.store_url), config.store_url));
    if (!token_file.empty()) {
      operator_credentials.push_back({"admin", Role::kAdmin, token_file, "", "admin token file"});
    }
  }
  ASSIGN_OR_RETURN(OperatorAuth operator_auth, OperatorAuth::Create(mutual_tls, operator_credentials));
  server->operator_auth_ = std::make_unique<OperatorAuth>(std::move(operator_auth));

  try {
    server->exposer_ =
        std::make_unique<prometheus::Exposer>(MetricsListenerOptions(config.metrics_listen));
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("--metrics_listen=", config.metrics_listen, ": cannot listen: ", e.what()));
  }
  server->exposer_->RegisterCollectable(server->registry_);
  server->exposer_->RegisterCollectable(server->metrics_->resolve_stats());
  server->exposer_->RegisterCollectable(server->metrics_->process_stats());
  server->tls_ = std::move(transport.tls);
  server->certificate_expiry_ = std::make_shared<CertificateExpiry>(
      std::vector<std::pair<std::string, std::string>>{
          {"server", server->tls_ != nullptr ? server->tls_->served_certificate_path() : ""},
          {"client_ca", server->tls_ != nullptr ? server->tls_->served_client_ca_path() : ""}});
  server->exposer_->RegisterCollectable(server->certificate_expiry_);
  const std::vector<int> metrics_ports = server->exposer_->GetListeningPorts();
  server->metrics_address_ =
      WithPort(config.metrics_listen, metrics_ports.empty() ? 0 : metrics_ports.front());

  if (config.store_url != "none") {
    absl::StatusOr<std::unique_ptr<store::FleetStore>> store = store::OpenFleetStore(config.store_url);
    if (!store.ok()) {
      return absl::Status(store.status().code(),
                          absl::StrCat("--store=", store::RedactedStoreUrl(config.store_url), ": ",
                                       store.status().message()));
    }
    FleetOptions options;
    options.verification.min_devices = config.verified_min_devices;
    options.verification.window = config.verification_window;
    options.verification.regression_fraction = config.regression_fraction;
    options.devices_seen_window = config.devices_seen_window;
    options.refresh_interval = config.fleet_refresh_interval;
    options.devices_seen_refresh_interval = config.devices_seen_refresh_interval;
    options.drift_persistent_after = config.drift_persistent_after;
    options.audit_retention = config.audit_retention;
    options.audit_max_events = static_cast<uint64_t>(config.audit_max_events);
    options.write_behind.capacity = static_cast<size_t>(config.registry_queue_capacity);
    options.write_behind.max_bytes = static_cast<size_t>(config.registry_queue_max_mb) << 20;
    options.write_behind.max_batch = static_cast<size_t>(config.registry_batch_size);
    options.write_behind.flush_period = config.registry_flush_period;
    server->fleet_ = std::make_unique<FleetState>(*std::move(store), options, &server->snapshots_,
                                                  server->metrics_.get(), SystemClockInstance());
    server->fleet_queries_ = std::make_unique<FleetQueries>(server->fleet_.get());
    server->rollout_metrics_ = std::make_unique<RolloutMetrics>(server->registry_);
    RolloutDependencies rollout_deps;
    rollout_deps.store = &server->fleet_->store();
    rollout_deps.cache = &server->rollout_cache_;
    rollout_deps.metrics = server->rollout_metrics_.get();
    const SnapshotHolder* snapshots = &server->snapshots_;
    rollout_deps.policy = [snapshots] { return snapshots->Share()->policy; };
    rollout_deps.now = [] { return SystemClockInstance()->Now(); };
    // A member no shaped resolve reaches within this long is unreached:
    // it resolves at most every --resolve_interval (plus jitter), and a
    // stage may open just after it asked.
    rollout_deps.reach_timeout =
        deploy::ReachTimeout(config.resolve_interval, config.rollout_resolve_interval);
    WeightPathServer* recorder = server.get();
    rollout_deps.audit = [recorder](v1::AuditEvent event) {
      recorder->RecordSystemEvent(std::move(event));
    };
    server->rollout_admin_ = std::make_unique<RolloutAdmin>(rollout_deps);
    server->rollout_reconciler_ = std::make_unique<RolloutReconciler>(rollout_deps);
  }
  StoreExecutor::Options device_workers;
  device_workers.threads = kDeviceStoreWorkerThreads;
  device_workers.max_queued = kDeviceStoreCallsQueued;
  server->device_store_executor_ = std::make_unique<StoreExecutor>(device_workers);
  StoreExecutor::Options operator_workers;
  operator_workers.threads = kOperatorStoreWorkerThreads;
  operator_workers.max_queued = kOperatorStoreCallsQueued;
  server->operator_store_executor_ = std::make_unique<StoreExecutor>(operator_workers);
  WeightPathServer* self = server.get();
  FleetAdminService::ExplainFunction explain = [self](const v1::ExplainDecisionRequest& request) {
    const std::shared_ptr<const Snapshot> snapshot = self->snapshots_.Share();
    const std::shared_ptr<const RolloutCache::Rollouts> rollouts = self->rollout_cache_.Current();
    ExplainContext context;
    context.snapshot = snapshot.get();
    context.rollouts = rollouts.get();
    if (self->fleet_ != nullptr) {
      context.store = &self->fleet_->store();
      FleetState* fleet = self->fleet_.get();
      context.apply_verification = [fleet](const v1::ResolveWeightPathRequest& subject,
                                           v1::ResolveWeightPathResponse* decision) {
        fleet->ApplyVerification(subject, decision);
      };
      FleetQueries* queries = self->fleet_queries_.get();
      context.verification_matrix = [queries] { return queries->VerificationMatrix(); };
    }
    context.now = SystemClockInstance()->Now();
    return ExplainDecision(request, context);
  };
  // With a fleet store every part exists; without one (--store=none) the
  // services are told so explicitly.
  std::optional<FleetAdminService::Fleet> admin_fleet = FleetAdminService::kNoFleet;
  std::optional<WeightPathService::Fleet> device_fleet = WeightPathService::kNoFleet;
  if (server->fleet_ != nullptr) {
    admin_fleet.emplace(FleetAdminService::Fleet{*server->fleet_queries_, *server->rollout_admin_});
    device_fleet.emplace(WeightPathService::Fleet{*server->fleet_, server->rollout_cache_,
                                                  *server->rollout_metrics_});
  }
  // The server binds and accepts on the gRPC port itself and hands each
  // connection to gRPC (server/grpc_listener.h says why). Bound before the
  // services: the default replica name is the bound address.
  ASSIGN_OR_RETURN(server->grpc_listener_,
                   GrpcListener::Bind(config.listen, config.max_connections,
                                      config.handshake_timeout, server->metrics_.get()));
  server->grpc_address_ = WithPort(config.listen, server->grpc_listener_->port());
  // The host name alone told two replicas on one host (or two pods named
  // after one node) apart in no way; with the bound address they differ.
  server->replica_name_ = config.replica_name.empty()
                              ? absl::StrCat(ThisHostName(), "/", server->grpc_address_)
                              : config.replica_name;
  if (server->fleet_ != nullptr) {
    // The first load happened before the store was open; every reload from
    // here on is told by the watcher.
    server->RecordPolicyLoad(server->watcher_->InitialLoad());
    server->watcher_->SetLoadListener(
        [self](const PolicyLoad& load) { self->RecordPolicyLoad(load); });
  }
  server->fleet_admin_ = std::make_unique<FleetAdminService>(
      server->operator_auth_.get(), admin_fleet, std::move(explain), server->operator_store_executor_.get(),
      server->metrics_.get(), server->replica_name_);
  DeviceCallLimitOptions limits;
  limits.rate_per_second = config.device_rate_limit;
  limits.burst = config.device_rate_burst;
  limits.max_inflight = config.max_inflight_device_calls;
  server->device_call_limits_ = std::make_unique<DeviceCallLimits>(limits);
  server->service_ = std::make_unique<WeightPathService>(
      &server->snapshots_, server->metrics_.get(), mutual_tls, device_fleet,
      server->device_store_executor_.get(), server->device_call_limits_.get(),
      ResolveIntervalsOf(config), server->operator_auth_.get());
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> acceptor =
      builder.experimental().AddExternalConnectionAcceptor(
          grpc::ServerBuilder::experimental_type::ExternalConnectionType::FROM_FD, credentials);
  builder.RegisterService(server->service_.get());
  builder.RegisterService(server->fleet_admin_.get());
  // v1alpha comes from libgrpc++_reflection's plugin (main.cc); v1 is ours.
  builder.SetOption(ReflectionV1ServerOption());
  builder.SetMaxReceiveMessageSize(kMaxReceiveMessageBytes);
  LimitConnections(config, &builder);
  // gRPC inflates a compressed message before the size limit applies, so a
  // 61 KB gzip of 60 MB of zeros would cost the memory and CPU of the whole
  // 60 MB. Every message here is small: compressed requests are refused
  // (UNIMPLEMENTED, naming the algorithm) and answers go out uncompressed.
  builder.SetCompressionAlgorithmSupportStatus(GRPC_COMPRESS_DEFLATE, false);
  builder.SetCompressionAlgorithmSupportStatus(GRPC_COMPRESS_GZIP, false);
  server->grpc_server_ = builder.BuildAndStart();
  if (server->grpc_server_ == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("--listen=", config.listen, ": gRPC could not start its server"));
  }
  server->grpc_listener_->Start(std::move(acceptor));

  // SERVING only now: the snapshot is loaded and both ports are up.
  grpc::HealthCheckServiceInterface* health = server->grpc_server_->GetHealthCheckService();
  health->SetServingStatus("", true);
  health->SetServingStatus(kWeightPathServiceName, true);
  if (server->fleet_ != nullptr) {
    // FleetAdmin's health follows the store; resolves stay SERVING because
    // they fall back to the policy when the store is away.
    server->fleet_->Start(
        [health](bool store_up) { health->SetServingStatus(kFleetAdminServiceName, store_up); });
    // Fills the resolve cache at once, then re-reads and evaluates every
    // fleet refresh interval.
    server->rollout_reconciler_->Start(config.fleet_refresh_interval);
  } else {
    health->SetServingStatus(kFleetAdminServiceName, false);
  }
  server->watcher_->Start();
  if (server->tls_ != nullptr) {
    ServerMetrics* metrics = server->metrics_.get();
    server->tls_->Start([metrics](TlsCheck check) {
      if (check != TlsCheck::kUsableAgain) metrics->RecordTlsReload(check == TlsCheck::kTaken);
      metrics->SetTlsFilesRefused(check == TlsCheck::kRefused);
    });
  }
  if (server->timestamp_signer_ != nullptr) server->timestamp_signer_->Start();
  if (config.tls_cert_path.empty() && !IsLoopbackAddress(config.listen)) {
    spdlog::warn("--insecure: serving plaintext gRPC on non-loopback address {}",
                 server->grpc_address_);
  }
  spdlog::info("serving gRPC on {} ({}), metrics on http://{}/metrics", server->grpc_address_,
               config.tls_cert_path.empty()    ? "plaintext"
               : config.client_ca_path.empty() ? "TLS"
                                               : "mutual TLS",
               server->metrics_address_);
  if (config.listener_check_interval > absl::ZeroDuration()) {
    ListenerWatchdogOptions check;
    check.address = server->grpc_address_;
    check.tls = !config.tls_cert_path.empty();
    check.interval = config.listener_check_interval;
    ASSIGN_OR_RETURN(server->listener_watchdog_,
                     ListenerWatchdog::Create(check, server->metrics_.get(), [self](const std::string& why) {
                       self->OnListenerDeaf(why);
                     }));
    server->listener_watchdog_->Start();
  }
  return server;
}

void WeightPathServer::OnListenerDeaf(const std::string& why) {
  // Health first, for whatever still reaches it through an open connection;
  // then the same shutdown as SIGTERM, which main() turns into exit status 1.
  listener_deaf_.store(true);
  grpc_server_->GetHealthCheckService()->Shutdown();
  spdlog::error("{}: health NOT_SERVING; exiting with status 1 so that the supervisor "
                "restarts the server",
                why);
  kill(getpid(), SIGTERM);
}

void WeightPathServer::RecordSystemEvent(v1::AuditEvent event) {
  if (fleet_ == nullptr) return;
  // The same bounds as an operator's call (api/audit_event.h).
  event.set_identity(AuditText(event.identity(), kAuditFieldMaxBytes));
  event.set_target(AuditText(event.target(), kAuditFieldMaxBytes));
  event.set_request_summary(AuditText(event.request_summary(), kAuditSummaryMaxBytes));
  event.set_message(AuditText(event.message(), kAuditMessageMaxBytes));
  event.set_replica(replica_name_);
  // A refusal is counted and logged whole by FleetState; the action it
  // records has happened either way. Bounded like an operator's call: these
  // are written at start (before the port serves), inside a reload and by
  // the rollout driver, none of which may wait on a store that hangs.
  const store::ScopedCallDeadline deadline(absl::Now() + kSystemAuditWriteDeadline);
  fleet_->RecordAuditEvent(event).IgnoreError();
}

void WeightPathServer::RecordPolicyLoad(const PolicyLoad& load) {
  v1::AuditEvent event;
  *event.mutable_time() = ToProtoTime(load.time);
  event.set_identity(kPolicyFileIdentity);
  event.set_role("system");
  event.set_rpc(load.kind == PolicyLoad::Kind::kLoaded ? "PolicyLoaded" : "ReloadRefused");
  // The version now served, or the one that keeps serving.
  event.set_target(load.policy_version);
  event.set_request_summary(PolicyLoadSummary(load));
  event.set_result(absl::StatusCodeToString(load.refusal.code()));
  event.set_message(PolicyLoadMessage(load));
  RecordSystemEvent(std::move(event));
}

void WeightPathServer::RequestReload() {
  watcher_->RequestReload();
  if (tls_ != nullptr) tls_->RequestCheck();
}

void WeightPathServer::Shutdown(absl::Duration grace) {
  if (shut_down_) return;
  shut_down_ = true;
  // A reload in progress is abandoned first, so it winds down while the
  // in-flight calls finish instead of after them, and can never hold the
  // exit past the grace period.
  if (listener_watchdog_ != nullptr) listener_watchdog_->Stop();
  // No connection is handed to gRPC once it begins to shut down.
  if (grpc_listener_ != nullptr) grpc_listener_->Stop();
  if (watcher_ != nullptr) watcher_->BeginStop();
  if (timestamp_signer_ != nullptr) timestamp_signer_->Stop();
  if (grpc_server_ != nullptr) {
    // Load balancers and probes see NOT_SERVING first; Shutdown() itself
    // stops accepting calls and waits for the in-flight ones.
    grpc_server_->GetHealthCheckService()->Shutdown();
    grpc_server_->Shutdown(absl::ToChronoTime(absl::Now() + grace));
    grpc_server_->Wait();
    spdlog::info("gRPC server stopped");
  }
  // gRPC waited for every call to finish, and the store workers finish
  // theirs, so nothing is queued any more.
  if (device_store_executor_ != nullptr) device_store_executor_->Shutdown();
  if (operator_store_executor_ != nullptr) operator_store_executor_->Shutdown();
  if (watcher_ != nullptr) watcher_->Stop();
  // After the gRPC server: no resolve can enqueue a record any more, so the
  // flush below writes the last of them.
  if (rollout_reconciler_ != nullptr) rollout_reconciler_->Stop();
  if (fleet_ != nullptr) fleet_->Shutdown();
  if (tls_ != nullptr) tls_->Stop();
  exposer_.reset();
}

}  // namespace weightpath::server
