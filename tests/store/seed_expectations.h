// The seed's measured figures (Xeon Platinum 8480C, 24 threads,
// Spark-X2.5-1.7B) as the policy would carry them, for tests and benchmarks.
#pragma once

#include <vector>

#include "store/verification.h"

namespace weightpath::store::testing {

inline constexpr char kSeedCpu[] = "Intel Xeon Platinum 8480C";
// What /proc/cpuinfo calls the same part.
inline constexpr char kSeedCpuAsProbed[] = "Intel(R) Xeon(R) Platinum 8480C";

inline policy::ExpectedFigures SeedFigures(double decode_tok_s, double gemm_ms, double step_ms,
                                           uint32_t exact, uint32_t prompts) {
  policy::ExpectedFigures figures;
  figures.cpu_model = kSeedCpu;
  figures.threads = 24;
  figures.model = "Spark-X2.5-1.7B";
  figures.condition = "per-op profiles back to back on the same cores";
  figures.decode_tok_s = decode_tok_s;
  figures.gemm_ms_per_step = gemm_ms;
  figures.step_ms = step_ms;
  figures.fidelity_exact_matches = exact;
  figures.fidelity_prompts = prompts;
  return figures;
}

// `policy_verified` as the seed has it: both 4-bit paths measured on x86,
// w4a16-tinygemm unverified on arm64.
inline std::vector<PathExpectation> SeedExpectations(bool x86_policy_verified = true) {
  return {
      {"w4a8-amx", "x86_cpu", x86_policy_verified, {SeedFigures(86.6, 5.91, 11.55, 1, 12)}},
      {"w4a16-tinygemm", "x86_cpu", x86_policy_verified, {SeedFigures(80.0, 6.85, 12.51, 2, 12)}},
      {"w4a16-tinygemm", "arm64_cpu", false, {}},
  };
}

}  // namespace weightpath::store::testing
