#include "agent/trust_config.h"

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/control_characters.h"
#include "common/status_macros.h"

namespace weightpath::agent {
namespace {

// The same "file:line: key: reason" as the rest of the config's errors,
// with the file's own text escaped so it cannot forge a log line.
absl::Status Error(absl::string_view source_name, const YAML::Node& node, absl::string_view key,
                   absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(source_name, ":", node.Mark().line + 1, ": ",
                                                 ControlEscaped(key), ": ", ControlEscaped(what)));
}

absl::StatusOr<std::string> NonEmptyString(absl::string_view source_name, const YAML::Node& node,
                                           absl::string_view key) {
  if (!node.IsScalar()) return Error(source_name, node, key, "must be a string");
  if (node.Scalar().empty()) return Error(source_name, node, key, "must not be empty");
  return node.Scalar();
}

absl::Status CheckMetadataUrl(absl::string_view source_name, const YAML::Node& node,
                              absl::string_view url) {
  absl::string_view rest = url;
  if (!absl::ConsumePrefix(&rest, "https://") && !absl::ConsumePrefix(&rest, "http://")) {
    return Error(source_name, node, "trust.metadata_url",
                 absl::StrCat("'", url, "' is not an http:// or https:// URL"));
  }
  if (rest.empty() || rest.front() == '/') {
    return Error(source_name, node, "trust.metadata_url",
                 absl::StrCat("'", url, "' names no host"));
  }
  for (char c : url) {
    const unsigned char byte = static_cast<unsigned char>(c);
    if (byte <= 0x20 || byte == 0x7f) {
      return Error(source_name, node, "trust.metadata_url",
                   "must not hold spaces or control characters");
    }
  }
  // File names are appended to it ("/timestamp.json"), so a query or a
  // fragment would swallow them.
  if (url.find_first_of("?#") != absl::string_view::npos) {
    return Error(
        source_name, node, "trust.metadata_url",
        absl::StrCat("'", url, "' must not have a query or fragment (file names are appended)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TrustConfig> ParseTrustConfig(const YAML::Node& node,
                                             absl::string_view source_name) {
  if (!node.IsMap())
    return Error(source_name, node, "trust", "must be a map with root, metadata_url");
  for (const auto& entry : node) {
    const std::string key = entry.first.Scalar();
    if (key != "root" && key != "metadata_url") {
      return Error(source_name, entry.first, absl::StrCat("trust.", key),
                   "unknown key (known: metadata_url, root)");
    }
  }
  TrustConfig trust;
  for (const char* key : {"root", "metadata_url"}) {
    if (!node[key]) {
      return Error(source_name, node, absl::StrCat("trust.", key),
                   absl::StrCat("required in a trust block (",
                                std::string(key) == "root"
                                    ? "the initial trusted root.json provisioned with the device"
                                    : "base URL of the signed metadata",
                                ")"));
    }
  }
  ASSIGN_OR_RETURN(trust.root, NonEmptyString(source_name, node["root"], "trust.root"));
  ASSIGN_OR_RETURN(trust.metadata_url,
                   NonEmptyString(source_name, node["metadata_url"], "trust.metadata_url"));
  RETURN_IF_ERROR(CheckMetadataUrl(source_name, node["metadata_url"], trust.metadata_url));
  return trust;
}

}  // namespace weightpath::agent
