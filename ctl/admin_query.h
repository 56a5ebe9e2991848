// What the FleetAdmin read subcommands (devices, summary, verification)
// share: their flags end with -o, -h and the connection's (ViewFlags); --help
// prints the usage and the flag list; the request is checked before
// connecting; the answer is printed as JSON or YAML (-o json|yaml,
// ctl/view_output.h) or as the command's table. A command supplies only its
// own flags, its request, its call and its table.
#pragma once

#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/command_line.h"
#include "common/grpc_status.h"
#include "ctl/admin_output.h"
#include "ctl/command.h"
#include "ctl/command_error.h"
#include "ctl/rollout_client.h"
#include "ctl/view_output.h"

namespace weightpath::ctl {

template <typename Request, typename Response>
struct AdminQuery {
  std::string_view command;            // "summary", in error lines
  std::string_view usage;              // the --help text above the flag list
  const std::vector<FlagSpec>& flags;  // from ViewFlags
  // The request from the command's own flags; INVALID_ARGUMENT naming a bad one.
  std::function<absl::StatusOr<Request>(const ParsedArguments&)> request;
  std::function<absl::StatusOr<Response>(FleetAdminConnection&, Request)> call;
  std::function<void(const Response&, std::ostream&)> write_table;
};

template <typename Request, typename Response>
int RunAdminQuery(const AdminQuery<Request, Response>& query, const std::vector<std::string>& args,
                  CommandIo io) {
  int exit_code = kExitOk;
  const std::optional<ParsedArguments> arguments = ParseFlags(
      query.command, args, query.flags,
      [&query](std::ostream& out) { out << query.usage << "\n\n" << FlagHelp(query.flags); }, io,
      &exit_code);
  if (!arguments.has_value()) return exit_code;
  absl::StatusOr<ViewOutput> output = ParseViewOutput(arguments->Value("output"));
  if (!output.ok()) return ReportError(query.command, output.status(), io.err);
  absl::StatusOr<Request> request = query.request(*arguments);
  if (!request.ok()) return ReportError(query.command, request.status(), io.err);
  absl::StatusOr<FleetAdminConnection> connection = FleetAdminConnection::Open(*arguments);
  if (!connection.ok()) return ReportError(query.command, connection.status(), io.err);
  absl::StatusOr<Response> response = query.call(*connection, *std::move(request));
  if (!response.ok()) return ReportError(query.command, response.status(), io.err);
  if (*output == ViewOutput::kTable) {
    query.write_table(*response, io.out);
  } else {
    absl::Status written = WriteMessage(*response, *output, io.out);
    if (!written.ok()) return ReportError(query.command, written, io.err);
  }
  return kExitOk;
}

// One unary FleetAdmin call with the connection's deadline and token; the
// gRPC status as the connection's CallStatus(`name`, ...).
template <typename Request, typename Response>
absl::StatusOr<Response> CallFleetAdmin(
    FleetAdminConnection& connection,
    grpc::Status (v1::FleetAdmin::Stub::*rpc)(grpc::ClientContext*, const Request&, Response*),
    const Request& request, std::string_view name) {
  Response response;
  std::unique_ptr<grpc::ClientContext> context = connection.NewContext();
  const grpc::Status result = (connection.stub().*rpc)(context.get(), request, &response);
  absl::Status status =
      connection.CallStatus(absl::string_view(name.data(), name.size()), result, *context);
  if (!status.ok()) return status;
  return response;
}

}  // namespace weightpath::ctl
