#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "agent/base/local_file.h"
#include "agent/probe/probe_steps.h"
#include "policy/profile_json.h"

namespace weightpath::probe {

absl::StatusOr<v1::HardwareProfile> LoadProfileFile(const std::string& variable,
                                                    const std::string& path) {
  // The variable may name anything (a FIFO, /dev/zero): read it the bounded
  // way, and keep the documented codes (NOT_FOUND / PERMISSION_DENIED when
  // unreadable, INVALID_ARGUMENT when it is not a profile).
  absl::StatusOr<std::string> text = agent::ReadLocalFile(path, variable);
  if (!text.ok()) {
    if (absl::IsUnavailable(text.status())) return absl::NotFoundError(text.status().message());
    return text.status();
  }
  auto profile = policy::ParseProfileJson(*text, absl::StrCat(variable, "=", path));
  if (!profile.ok()) return profile.status();
  profile->set_source(absl::StrCat("file:", path));
  return profile;
}

}  // namespace weightpath::probe
