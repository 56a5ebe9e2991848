#include "agent/decision/last_good_store.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "agent/base/atomic_file.h"
#include "agent/decision/engine_input.h"
#include "common/status_macros.h"

namespace weightpath::agent {

std::string LastGoodPath(const std::string& state_dir) {
  return (std::filesystem::path(state_dir) / "last_good_decision.json").string();
}

absl::Status SaveLastGood(const DecisionRecord& record, const std::string& state_dir) {
  // A later boot repeats this decision without asking anyone: it must be
  // one the engine can be given.
  RETURN_IF_ERROR(ValidateForEngine(record));
  ASSIGN_OR_RETURN(std::string json, DecisionToJson(record));
  return WriteFileAtomically(LastGoodPath(state_dir), json);
}

absl::StatusOr<DecisionRecord> LoadLastGood(const std::string& state_dir) {
  const std::string path = LastGoodPath(state_dir);
  absl::StatusOr<DecisionRecord> record = ReadDecisionFile(path);
  if (record.status().code() == absl::StatusCode::kNotFound) {
    return absl::NotFoundError(absl::StrCat("no last good decision at ", path));
  }
  return record;
}

}  // namespace weightpath::agent
