#include "agent/last_good_store.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "agent/atomic_file.h"
#include "common/status_macros.h"

namespace weightpath::agent {

std::string LastGoodPath(const std::string& state_dir) {
  return (std::filesystem::path(state_dir) / "last_good_decision.json").string();
}

absl::Status SaveLastGood(const DecisionRecord& record, const std::string& state_dir) {
  ASSIGN_OR_RETURN(std::string json, DecisionToJson(record));
  return WriteFileAtomically(LastGoodPath(state_dir), json);
}

absl::StatusOr<DecisionRecord> LoadLastGood(const std::string& state_dir) {
  const std::string path = LastGoodPath(state_dir);
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("no last good decision at ", path));
  std::stringstream contents;
  contents << in.rdbuf();
  return DecisionFromJson(contents.str(), path);
}

}  // namespace weightpath::agent
