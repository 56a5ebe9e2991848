#include "server/api/path_candidates.h"

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "policy/cpu_model.h"
#include "policy/engine_args.h"
#include "policy/path_standing.h"
#include "store/policy_expectations.h"
#include "store/verification.h"

namespace weightpath::server {
namespace {

v1::PathCandidate::Standing ToProto(policy::PathStandingKind standing) {
  switch (standing) {
    case policy::PathStandingKind::kChosen:
      return v1::PathCandidate::STANDING_CHOSEN;
    case policy::PathStandingKind::kCompatible:
      return v1::PathCandidate::STANDING_COMPATIBLE;
    case policy::PathStandingKind::kIncompatible:
      return v1::PathCandidate::STANDING_INCOMPATIBLE;
  }
  return v1::PathCandidate::STANDING_UNSPECIFIED;
}

// The matrix cell of this build on this class and CPU model, as
// store::VerificationForDevice finds it; null when no device reported it.
const v1::VerificationCell* FindCell(const v1::GetVerificationMatrixResponse& matrix,
                                     std::string_view path, std::string_view hardware_class,
                                     const std::string& normalized_cpu) {
  for (const v1::VerificationCell& cell : matrix.cells()) {
    if (cell.path() == path && cell.hardware_class() == hardware_class &&
        policy::NormalizeCpuModel(cell.cpu_model()) == normalized_cpu) {
      return &cell;
    }
  }
  return nullptr;
}

// The policy's decode figure for this CPU model, the first in policy order
// (the one a regression is judged against).
std::optional<double> ExpectedDecode(const policy::PathDefinition& path,
                                     const std::string& normalized_cpu) {
  for (const policy::ExpectedFigures& figures : path.expected) {
    if (figures.decode_tok_s.has_value() && policy::FiguresMatchCpu(figures, normalized_cpu)) {
      return figures.decode_tok_s;
    }
  }
  return std::nullopt;
}

// The NIM group: a rule's hardware condition or a failed requirement makes
// a path incompatible, whatever the rules chose.
void FillFit(const policy::PathStanding& standing, v1::PathCandidate* candidate) {
  const policy::PathFit& fit = standing.fit;
  switch (fit.kind) {
    case policy::FitKind::kIncompatible:
      candidate->set_fit(v1::PathCandidate::FIT_INCOMPATIBLE);
      candidate->set_failing_requirement(fit.requirement);
      break;
    case policy::FitKind::kLowMemory:
      candidate->set_fit(v1::PathCandidate::FIT_LOW_MEMORY);
      candidate->set_failing_requirement(fit.requirement);
      break;
    case policy::FitKind::kRunnable:
      candidate->set_fit(v1::PathCandidate::FIT_RUNNABLE);
      break;
  }
  if (standing.standing == policy::PathStandingKind::kIncompatible &&
      fit.kind != policy::FitKind::kIncompatible) {
    candidate->set_fit(v1::PathCandidate::FIT_INCOMPATIBLE);
    candidate->set_failing_requirement("match");
  }
  candidate->set_fit_reason(fit.reason);
  if (fit.memory_per_gpu_bytes) candidate->set_memory_per_gpu_bytes(*fit.memory_per_gpu_bytes);
  if (fit.memory_budget_per_gpu_bytes) {
    candidate->set_memory_budget_per_gpu_bytes(*fit.memory_budget_per_gpu_bytes);
  }
  if (fit.max_model_len) candidate->set_max_model_len(*fit.max_model_len);
}

}  // namespace

absl::Status FillPathCandidates(
    const policy::Policy& policy, const v1::ResolveWeightPathRequest& request,
    std::string_view hardware_class, const policy::ModelFacts& model,
    const absl::StatusOr<v1::GetVerificationMatrixResponse>* matrix,
    google::protobuf::RepeatedPtrField<v1::PathCandidate>* candidates) {
  ASSIGN_OR_RETURN(const std::vector<policy::PathStanding> standings,
                   policy::JudgePaths(policy, request.profile(), request.labels(), model));
  const std::vector<store::PathExpectation> expectations = store::ExpectationsFromPolicy(policy);
  const std::string normalized_cpu = policy::NormalizeCpuModel(request.profile().cpu_model());
  const bool matrix_read = matrix != nullptr && matrix->ok();
  for (const policy::PathStanding& standing : standings) {
    const policy::PathDefinition& path = *standing.path;
    v1::PathCandidate* candidate = candidates->Add();
    candidate->set_path(path.id);
    candidate->set_standing(ToProto(standing.standing));
    for (const v1::Priority priority : standing.chosen_for) candidate->add_chosen_for(priority);
    candidate->set_reason(standing.reason);
    FillFit(standing, candidate);
    if (standing.standing != policy::PathStandingKind::kIncompatible) {
      policy::FillEngineKwargs(path, request.profile(), model, candidate->mutable_engine_kwargs());
    }

    const v1::VerificationCell* cell =
        matrix_read ? FindCell(**matrix, path.name, hardware_class, normalized_cpu) : nullptr;
    v1::Verification* verification = candidate->mutable_verification();
    if (matrix != nullptr && !matrix->ok()) {
      verification->set_source(v1::Verification::SOURCE_UNAVAILABLE);
      verification->set_reason(
          absl::StrCat("the fleet store could not be read: ", matrix->status().message()));
    } else if (cell != nullptr) {
      *verification = cell->verification();
    } else {
      *verification =
          store::VerificationForDevice({}, expectations, path.name, hardware_class,
                                       request.profile().cpu_model())
              .verification;
    }
    if (cell != nullptr) {
      candidate->set_devices_reported(cell->device_count());
      if (cell->decode_tok_s().samples() > 0) {
        candidate->set_median_decode_tok_s(cell->decode_tok_s().median());
      }
    }
    if (const std::optional<double> expected = ExpectedDecode(path, normalized_cpu)) {
      candidate->set_expected_decode_tok_s(*expected);
    }
  }
  return absl::OkStatus();
}

}  // namespace weightpath::server
