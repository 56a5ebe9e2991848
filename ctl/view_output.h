// Output and errors of the operator views (explain, device show, rollout
// status --watch, apply): -o table|json|yaml, where json is the protobuf
// JSON mapping (proto field names, defaults printed) and yaml the same
// document in YAML block style; and one line on stderr for a call the
// server refused or could not answer, naming the RPC and the gRPC code.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/command_line.h"
#include "deploy/stage_text.h"
#include "google/protobuf/message.h"

namespace weightpath::ctl {

enum class ViewOutput { kTable, kJson, kYaml };

// `own`, then --output/-o (table, json or yaml), --help/-h and
// ConnectionFlags().
std::vector<FlagSpec> ViewFlags(std::vector<FlagSpec> own);

// "table" (the default when absent), "json" or "yaml"; INVALID_ARGUMENT
// naming -o otherwise.
absl::StatusOr<ViewOutput> ParseViewOutput(const std::optional<std::string>& text);

// `message` as JSON or YAML (never kTable).
absl::Status WriteMessage(const google::protobuf::Message& message, ViewOutput output,
                          std::ostream& out);

// A JSON document that is not a protobuf message (e.g. TUF metadata), as
// JSON or in YAML block style (never kTable).
absl::Status WriteJsonDocument(const std::string& json, ViewOutput output, std::ostream& out);

// One JSON or YAML document of several messages, each under its name, in
// the order given: {"device": {...}, "verification": {...}}.
using NamedMessage = std::pair<std::string, const google::protobuf::Message*>;
absl::Status WriteMessages(const std::vector<NamedMessage>& messages, ViewOutput output,
                           std::ostream& out);

// "weightpathctl <command>: <RPC>: <CODE>: <message>" on one line, for a
// status from FromGrpcStatus (ReportError's line); kExitFailure whatever the
// code, since the command line itself was fine.
int ReportServerError(std::string_view command, const absl::Status& status, std::ostream& err);

// Whole seconds, largest units first: "0s", "45s", "2m 5s", "1h 0m 3s";
// the server's rollout reasons spell durations the same way.
using deploy::FormatSeconds;

// "1 device", "2 devices": `count` and the noun, plural unless it is one.
std::string Counted(uint64_t count, std::string_view singular, std::string_view plural);

}  // namespace weightpath::ctl
