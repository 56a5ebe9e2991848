#include "ctl/command_error.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/command_line.h"
#include "common/grpc_status.h"
#include "ctl/command.h"

namespace weightpath::ctl {

int ExitCodeFor(const absl::Status& status) {
  if (status.ok()) return kExitOk;
  if (ReceivedFrom(status).has_value()) return kExitFailure;
  switch (status.code()) {
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
  // FromGrpcStatus wrote "<RPC>: <message>"; the code goes after the RPC, so
  // the line says which call was refused and how.
  if (const std::optional<std::string> rpc = ReceivedFrom(status)) {
    const std::string code = absl::StatusCodeToString(status.code());
    const std::string prefix = *rpc + ": ";
    message = message.compare(0, prefix.size(), prefix) == 0
                  ? absl::StrCat(prefix, code, ": ", message.substr(prefix.size()))
                  : absl::StrCat(code, ": ", message);
  }
  // One line, whatever the message carried, so the error greps and logs cleanly.
  for (char& c : message) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  err << "weightpathctl " << command << ": " << message << "\n";
  return ExitCodeFor(status);
}

std::optional<ParsedArguments> ParseFlags(std::string_view command,
                                          const std::vector<std::string>& args,
                                          const std::vector<FlagSpec>& flags,
                                          const std::function<void(std::ostream&)>& write_help,
                                          CommandIo io, int* exit_code) {
  absl::StatusOr<ParsedArguments> parsed = ParseArguments(args, flags);
  if (!parsed.ok()) {
    *exit_code = UsageError(io.err, "weightpathctl " + std::string(command),
                            parsed.status().message());
    return std::nullopt;
  }
  if (parsed->help()) {
    write_help(io.out);
    *exit_code = kExitOk;
    return std::nullopt;
  }
  return *std::move(parsed);
}

}  // namespace weightpath::ctl
