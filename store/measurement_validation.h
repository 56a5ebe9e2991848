// Checks on what agents report, before anything touches the store. Pure; the
// server calls these and returns their status as is (INVALID_ARGUMENT naming
// the field at fault).
#pragma once

#include "absl/status/status.h"
#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::store {

// Bounds are sanity limits, far beyond any real device, that catch unit
// mix-ups and garbage (NaN, negative rates), not slow hardware:
//   idempotency_key, device_id, path: required, at most 256 bytes;
//   model, engine_version: at most 256 bytes (common/report_limits.h);
//   decode_tok_s: finite, > 0 and <= 1e6;
//   prefill_tok_s: finite, >= 0 and <= 1e7 (0 = not measured);
//   gemm_ms_per_step, step_ms: finite, >= 0 and <= 1e6 ms (0 = not measured);
//   threads: 1..4096;
//   fidelity: prompts <= 10000 and exact_matches <= prompts;
//   measured_at, when set: a valid timestamp.
absl::Status ValidateMeasurement(const v1::ReportMeasurementRequest& request);

// idempotency_key and device_id required (<= 256 bytes); path,
// artifact_sha256, policy_version, rollout_id at most 256 bytes and detail at
// most 1024 (common/report_limits.h); outcome specified; observed_at valid
// when set; task counts only on OUTCOME_TASKS (summed in 64 bits, so no
// combination of counts wraps to "none").
absl::Status ValidateOutcome(const v1::ReportOutcomeRequest& request);

}  // namespace weightpath::store
