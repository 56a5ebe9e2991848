// spdlog set-up: human-readable lines by default, one JSON object a line
// with --log_format=json (for log shippers), always on stderr so stdout
// stays free for the machine-readable start-up line. Either way one message
// is one line: the text format writes control characters in a message as
// \xNN (common/control_characters.h), the JSON format escapes them.
#pragma once

#include "absl/strings/string_view.h"
#include <string>
#include <string_view>

#include "server/config/server_config.h"

namespace weightpath::server {

// `level` is one ValidateServerConfig accepted.
void ConfigureLogging(LogFormat format, absl::string_view level);

// Escapes `text` for a JSON string body (no surrounding quotes).
void AppendJsonEscaped(absl::string_view text, std::string* out);

}  // namespace weightpath::server
