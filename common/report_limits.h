// How long each string a device reports may be: the server refuses a longer
// one (INVALID_ARGUMENT naming the field) before anything is stored, and the
// agent trims what it writes itself (an error message in `detail`) to fit.
// Every stored string is re-read on each refresh and listed to operators, so
// none is bounded only by the 64 KiB message limit.
#pragma once

#include <cstddef>
#include <cstdint>

namespace weightpath {

// Ids, names and versions: idempotency_key, device_id, model, path,
// engine_version, artifact_sha256, policy_version, rollout_id.
inline constexpr size_t kMaxReportStringBytes = 256;
// ReportOutcome.detail is free text (an engine's error message, a rollback
// note): room for a few lines, not for a log.
inline constexpr size_t kMaxOutcomeDetailBytes = 1024;
// ReportOutcome's downloaded_*_bytes, each: a petabyte is past any build a
// device stages, and far from where a counter of doubles loses whole bytes
// (2^53), so one hostile report cannot make the fleet's totals meaningless.
inline constexpr uint64_t kMaxReportedDownloadBytes = uint64_t{1} << 50;

}  // namespace weightpath
