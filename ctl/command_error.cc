#include "ctl/command_error.h"

#include <string>

#include "ctl/command.h"

namespace weightpath::ctl {

int ExitCodeFor(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return kExitOk;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kOutOfRange:
      return kExitUsage;
    default:
      return kExitFailure;
  }
}

int ReportError(std::string_view command, const absl::Status& status, std::ostream& err) {
  std::string message(status.message());
  // One line, whatever the message carried, so the error greps and logs cleanly.
  for (char& c : message) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  err << "weightpathctl " << command << ": " << message << "\n";
  return ExitCodeFor(status);
}

}  // namespace weightpath::ctl
