#include "server/metrics.h"

#include <utility>

#include "absl/hash/hash.h"
#include "absl/status/status.h"
#include "policy/hardware_class.h"

namespace weightpath::server {
namespace {

// From 25 µs (a resolve on an idle server) to 100 ms (a wedged one).
const prometheus::Histogram::BucketBoundaries& DurationBuckets() {
  static const prometheus::Histogram::BucketBoundaries buckets = {
      0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001,
      0.0025,   0.005,   0.01,   0.025,   0.05,   0.1};
  return buckets;
}

std::string PriorityLabel(int8_t priority) {
  switch (priority) {
    case v1::PRIORITY_SPEED: return "speed";
    case v1::PRIORITY_FIDELITY: return "fidelity";
    default: return "";
  }
}

}  // namespace

size_t ServerMetrics::ResolveKeyHash::operator()(const ResolveKeyView& key) const {
  return absl::HashOf(key.hardware_class, key.path, key.priority, key.code);
}

ServerMetrics::ServerMetrics(std::shared_ptr<prometheus::Registry> registry)
    : registry_(std::move(registry)),
      resolve_requests_(prometheus::BuildCounter()
                            .Name("weightpath_resolve_requests_total")
                            .Help("ResolveWeightPath calls by hardware class, path, effective "
                                  "priority and gRPC status code")
                            .Register(*registry_)),
      resolve_duration_(prometheus::BuildHistogram()
                            .Name("weightpath_resolve_duration_seconds")
                            .Help("Time spent in the ResolveWeightPath handler, validation "
                                  "included")
                            .Register(*registry_)
                            .Add({}, DurationBuckets())),
      reloads_(prometheus::BuildCounter()
                   .Name("weightpath_policy_reloads_total")
                   .Help("Policy and catalog reloads by result; an error keeps the last "
                         "good pair serving")
                   .Register(*registry_)),
      reloads_succeeded_(reloads_.Add({{"result", "success"}})),
      reloads_failed_(reloads_.Add({{"result", "error"}})),
      policy_info_(prometheus::BuildGauge()
                       .Name("weightpath_policy_info")
                       .Help("Always 1; labelled with the policy and catalog versions in force")
                       .Register(*registry_)) {
  prometheus::BuildGauge()
      .Name("weightpath_build_info")
      .Help("Always 1; labelled with the server's version")
      .Register(*registry_)
      .Add({{"version", WEIGHTPATH_VERSION}})
      .Set(1);
}

void ServerMetrics::RecordResolve(const ResolveSummary& summary, int code, double seconds) {
  const ResolveKeyView key{
      static_cast<int8_t>(summary.hardware_class ? static_cast<int>(*summary.hardware_class) : -1),
      summary.path_name, static_cast<int8_t>(summary.effective_priority),
      static_cast<int8_t>(code)};
  ResolveCounter(key).Increment();
  resolve_duration_.Observe(seconds);
}

prometheus::Counter& ServerMetrics::ResolveCounter(const ResolveKeyView& key) {
  {
    absl::ReaderMutexLock lock(&resolve_counters_mutex_);
    auto it = resolve_counters_.find(key);
    if (it != resolve_counters_.end()) return *it->second;
  }
  // First call with this label tuple: the set is small and bounded (classes
  // x path names x priorities x codes), so children are never removed.
  absl::MutexLock lock(&resolve_counters_mutex_);
  auto it = resolve_counters_.find(key);
  if (it != resolve_counters_.end()) return *it->second;
  const std::string hardware_class =
      key.hardware_class < 0
          ? std::string()
          : std::string(policy::HardwareClassName(
                static_cast<policy::HardwareClass>(key.hardware_class)));
  prometheus::Counter& counter = resolve_requests_.Add(
      {{"hardware_class", hardware_class},
       {"path", std::string(key.path)},
       {"priority", PriorityLabel(key.priority)},
       {"code", absl::StatusCodeToString(static_cast<absl::StatusCode>(key.code))}});
  resolve_counters_.emplace(
      ResolveKey{key.hardware_class, std::string(key.path), key.priority, key.code}, &counter);
  return counter;
}

void ServerMetrics::RecordReload(bool succeeded) {
  (succeeded ? reloads_succeeded_ : reloads_failed_).Increment();
}

void ServerMetrics::SetPolicyInfo(absl::string_view policy_version,
                                  absl::string_view catalog_version) {
  absl::MutexLock lock(&policy_info_mutex_);
  if (policy_info_series_ != nullptr) policy_info_.Remove(policy_info_series_);
  policy_info_series_ = &policy_info_.Add({{"version", std::string(policy_version)},
                                           {"catalog_version", std::string(catalog_version)}});
  policy_info_series_->Set(1);
}

}  // namespace weightpath::server
