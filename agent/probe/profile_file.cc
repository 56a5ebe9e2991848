#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "agent/probe/probe_steps.h"
#include "policy/profile_json.h"

namespace weightpath::probe {

absl::StatusOr<v1::HardwareProfile> LoadProfileFile(const std::string& variable,
                                                    const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int error_number = errno;
    const std::string message =
        absl::StrCat(variable, "=", path, ": cannot read the profile file: ",
                     std::strerror(error_number));
    if (error_number == EACCES) return absl::PermissionDeniedError(message);
    return absl::NotFoundError(message);
  }
  std::ostringstream text;
  text << in.rdbuf();
  auto profile = policy::ParseProfileJson(text.str(), absl::StrCat(variable, "=", path));
  if (!profile.ok()) return profile.status();
  profile->set_source(absl::StrCat("file:", path));
  return profile;
}

}  // namespace weightpath::probe
