// Helpers for the fleet process tests: requests for devices of two classes,
// measurements, operator calls with a bearer token, and polling for state
// that the server reaches asynchronously (write-behind flush, refresh).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpcpp/grpcpp.h"
#include "tests/server/server_client.h"
#include "weightpath/v1/fleet_admin.grpc.pb.h"
#include "weightpath/v1/weightpath.grpc.pb.h"

namespace weightpath::server::testing {

inline constexpr char kAdminToken[] = "operator-token-4f1c9a";

// An arm64 CPU device: the policy serves it w4a16-tinygemm, which the
// policy has not measured (verified: false), so only fleet evidence can
// verify it.
inline v1::ResolveWeightPathRequest ArmRequest(const std::string& device_id) {
  v1::ResolveWeightPathRequest request;
  request.set_device_id(device_id);
  v1::HardwareProfile* profile = request.mutable_profile();
  profile->set_arch("aarch64");
  profile->set_cpu_model("Neoverse-N1");
  profile->add_cpu_flags("asimd");
  profile->set_n_logical(16);
  profile->set_accelerator("none");
  (*request.mutable_labels())["site"] = "lab-a";
  return request;
}

inline v1::ReportMeasurementRequest Measurement(const std::string& key,
                                                const std::string& device_id,
                                                const std::string& path, double decode_tok_s,
                                                uint32_t threads) {
  v1::ReportMeasurementRequest request;
  request.set_idempotency_key(key);
  request.set_device_id(device_id);
  request.set_model("Spark-X2.5-1.7B");
  request.set_path(path);
  request.set_engine_version("0.9.1");
  request.set_decode_tok_s(decode_tok_s);
  request.set_threads(threads);
  request.set_fidelity_exact_matches(3);
  request.set_fidelity_prompts(12);
  return request;
}

inline std::unique_ptr<grpc::ClientContext> AdminContext(const std::string& token = kAdminToken) {
  auto context = ContextWithDeadline();
  if (!token.empty()) context->AddMetadata("authorization", absl::StrCat("Bearer ", token));
  return context;
}

inline grpc::Status Report(v1::WeightPath::Stub& stub, const v1::ReportMeasurementRequest& request,
                           v1::ReportMeasurementResponse* response) {
  auto context = ContextWithDeadline();
  return stub.ReportMeasurement(context.get(), request, response);
}

// Polls `condition` every 50 ms until it holds or `timeout` passes (the
// server flushes and refreshes on its own schedule).
inline bool Eventually(const std::function<bool()>& condition,
                       absl::Duration timeout = absl::Seconds(20)) {
  const absl::Time end = absl::Now() + timeout;
  while (absl::Now() < end) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return condition();
}

}  // namespace weightpath::server::testing
