// rollout.yaml (weightpathctl rollout create): YAML -> Rollout, then what the
// server does with one it accepts: validation against the bundled policy,
// the start, an evaluation of its gates, and resolving example devices with
// it in force.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "ctl/rollout_yaml.h"
#include "deploy/rollout_evaluation.h"
#include "deploy/rollout_shaping.h"
#include "deploy/rollout_validation.h"
#include "policy/hardware_class.h"
#include "policy/policy.h"
#include "server/config_watcher.h"
#include "server/resolve/resolver.h"
#include "tests/fuzz/fuzz_support.h"

namespace weightpath::fuzz {
namespace {

const server::Snapshot& EmbeddedSnapshot() {
  static const auto* const snapshot = [] {
    auto loaded = server::LoadSnapshot(server::ConfigSources{});
    FUZZ_CHECK(loaded.ok(), loaded.status().ToString());
    return new std::shared_ptr<const server::Snapshot>(*loaded);
  }();
  return **snapshot;
}

std::vector<v1::ResolveWeightPathRequest> Devices() {
  std::vector<v1::ResolveWeightPathRequest> devices;
  const char* archs[] = {"x86_64", "aarch64", "x86_64"};
  const char* accelerators[] = {"none", "none", "cuda_discrete"};
  for (int i = 0; i < 3; ++i) {
    v1::ResolveWeightPathRequest request;
    request.set_device_id(absl::StrCat("edge-", i));
    request.mutable_profile()->set_arch(archs[i]);
    request.mutable_profile()->set_accelerator(accelerators[i]);
    request.mutable_profile()->set_supports_bf16(i != 0);
    if (i == 0) request.mutable_profile()->add_cpu_flags("amx_tile");
    (*request.mutable_labels())["workload"] = i == 1 ? "agentic" : "chat";
    devices.push_back(std::move(request));
  }
  return devices;
}

void CheckAccepted(const v1::Rollout& spec) {
  const server::Snapshot& snapshot = EmbeddedSnapshot();
  if (!deploy::ValidateRollout(spec, *snapshot.policy).ok()) return;
  const absl::Time now = absl::FromUnixSeconds(1700000000);
  absl::StatusOr<v1::Rollout> started = deploy::StartRollout(spec, *snapshot.policy, now);
  FUZZ_CHECK(started.ok(), absl::StrCat("a validated rollout does not start: ",
                                        started.status().ToString()));
  const deploy::RolloutVerdict verdict = deploy::EvaluateRollout(*started, {}, {}, now + absl::Hours(48));
  const v1::Rollout after = deploy::ApplyVerdict(*started, verdict, now + absl::Hours(48));
  const std::vector<v1::Rollout> rollouts = {*started, after};
  static const auto* const devices = new std::vector<v1::ResolveWeightPathRequest>(Devices());
  for (const v1::ResolveWeightPathRequest& request : *devices) {
    server::ResolveSummary summary;
    v1::ResolveWeightPathResponse response;
    const absl::Status status = server::Resolve(request, snapshot, &response, &summary, rollouts);
    FUZZ_CHECK(status.ok() || status.code() == absl::StatusCode::kNotFound ||
                   status.code() == absl::StatusCode::kInvalidArgument ||
                   status.code() == absl::StatusCode::kFailedPrecondition,
               absl::StrCat("resolving with a valid rollout: ", status.ToString()));
  }
}

}  // namespace
}  // namespace weightpath::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace weightpath;
  const std::string_view text = fuzz::Text(data, size);
  absl::StatusOr<v1::Rollout> rollout =
      ctl::ParseRolloutYaml(absl::string_view(text.data(), text.size()), "fuzz-rollout.yaml");
  if (!rollout.ok()) {
    FUZZ_CHECK(fuzz::IsCleanRefusal(rollout.status()), rollout.status().ToString());
    return 0;
  }
  fuzz::CheckAccepted(*rollout);
  return 0;
}
