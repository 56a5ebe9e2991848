// Turning what devices measured into verification evidence. Pure: rows and
// the policy's expectations in, cells out; no I/O, no clock (`now` is passed).
//
// Definitions (the rules the matrix and ResolveWeightPath's `verified` use):
// * Evidence is grouped per (path, hardware class, CPU model). CPU models are
//   compared after policy::NormalizeCpuModel, so "Intel(R) Xeon(R) Platinum
//   8480C" from /proc/cpuinfo and the policy's "Intel Xeon Platinum 8480C" are
//   one model; a figure also speaks for the names and patterns of its
//   cpu_model_aliases (policy/cpu_model.h), so with "Intel Xeon Platinum
//   8480+" among them an 8480+'s reports are judged by the 8480C's figure.
// * Regression: a report's decode tok/s below `regression_fraction` of the
//   policy's expected decode tok/s for the same CPU model AND the same thread
//   count (the first such expectation in policy order: the default policy
//   lists its back-to-back profile figure, e.g. 86.6 for w4a8-amx, first). A figure taken at 24 threads says nothing about 8 threads, so a
//   report with another thread count (or a CPU the policy never measured) is
//   not judged at all. A cell counts the devices whose latest report was not
//   judged (not_judged): they are neither regressed nor inside expectations.
// * Fidelity collapse: the cell's summed exact-match rate (k/n over all its
//   reports in the window) is below half the rate the policy expects for the
//   path (its expected k/n, preferring the same CPU model). Without a fidelity
//   expectation there is nothing to collapse from, so nothing is flagged.
// * Verified: the policy says the path was measured for that class (source
//   POLICY), or at least `min_devices` distinct devices whose latest report in
//   the window is not a regression, and no fidelity collapse (source FLEET).
//   A path measured but short of that is "measured, not verified", with why.
// * Verification.device_count is the devices whose latest report in the
//   window is not a regression, whatever the source; the cell's device_count
//   is every device that reported, so the difference is the devices that
//   regressed (for a policy-verified path too: "1 of 2 devices regressed").
// * prefill, GEMM and step figures of 0 mean "not measured" and are left out
//   of their statistics; decode tok/s is always required.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/time/time.h"
#include "policy/policy.h"
#include "weightpath/v1/fleet.pb.h"
#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::store {

// A measurement as stored: the report plus the device's hardware class and
// CPU model as the registry knew them when the report arrived.
struct StoredMeasurement {
  std::string measurement_id;
  std::string idempotency_key;
  std::string device_id;
  std::string hardware_class;
  std::string cpu_model;
  std::string model;
  std::string path;
  std::string engine_version;
  double decode_tok_s = 0;
  double prefill_tok_s = 0;
  double gemm_ms_per_step = 0;
  double step_ms = 0;
  uint32_t threads = 0;
  uint32_t fidelity_exact_matches = 0;
  uint32_t fidelity_prompts = 0;
  absl::Time measured_at;
  absl::Time received_at;
  bool regression = false;  // as judged when it was recorded
  std::string regression_reason;
};

// What the policy says about one path name on one hardware class.
struct PathExpectation {
  std::string path;             // weight path name, e.g. "w4a8-amx"
  std::string hardware_class;   // "" applies to every class
  bool policy_verified = false;
  std::vector<policy::ExpectedFigures> expected;
};

struct VerificationConfig {
  uint32_t min_devices = 3;
  absl::Duration window = absl::Hours(7 * 24);
  double regression_fraction = 0.8;
};

struct RegressionVerdict {
  bool regression = false;
  // False when the policy has no figure to compare with (another CPU model,
  // another thread count, no decode figure for the path): the measurement
  // is kept but says it was not judged, rather than passing silently.
  bool judged = true;
  std::string reason;  // names the figure, the expectation and the CPU
};

RegressionVerdict IsRegression(const StoredMeasurement& measurement,
                               const std::vector<policy::ExpectedFigures>& expected,
                               double regression_fraction);

// Every expectation for `path` that applies on `hardware_class`.
std::vector<policy::ExpectedFigures> ExpectedFor(const std::vector<PathExpectation>& expectations,
                                                 std::string_view path,
                                                 std::string_view hardware_class);

bool PolicyVerified(const std::vector<PathExpectation>& expectations, std::string_view path,
                    std::string_view hardware_class);

// True when k/n is below half the expected exact-match rate (see above).
bool FidelityCollapsed(uint64_t exact_matches, uint64_t prompts, std::string_view cpu_model,
                       const std::vector<policy::ExpectedFigures>& expected);

// One cell per (path, hardware class, CPU model) with a report in
// [now - window, now], sorted by path, class, CPU model.
std::vector<v1::VerificationCell> BuildVerificationMatrix(
    const std::vector<StoredMeasurement>& measurements,
    const std::vector<PathExpectation>& expectations, const VerificationConfig& config,
    absl::Time now);

// `cells` plus, for every path the policy marks as measured on a class, a
// cell (source POLICY, device_count 0) for each CPU model of its expected
// figures (or none, when they name none) that no device reported, so the
// operators' matrix lists what the policy vouches for and not only what the
// fleet measured. Sorted as BuildVerificationMatrix sorts.
void AddPolicyVerifiedCells(const std::vector<PathExpectation>& expectations,
                            std::vector<v1::VerificationCell>* cells);

struct DeviceVerification {
  bool verified = false;           // what ResolveWeightPath's `verified` says
  v1::Verification verification;   // and why
};

// The verification ResolveWeightPath reports for one device: the matrix cell
// of its (path, class, CPU model) if any, else the policy's flag.
DeviceVerification VerificationForDevice(const std::vector<v1::VerificationCell>& matrix,
                                       const std::vector<PathExpectation>& expectations,
                                       std::string_view path, std::string_view hardware_class,
                                       std::string_view cpu_model);

}  // namespace weightpath::store
