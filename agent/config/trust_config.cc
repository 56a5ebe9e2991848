#include "agent/config/trust_config.h"

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"

namespace weightpath::agent {
namespace {

absl::Status CheckMetadataUrl(const yaml::Reader& reader, const yaml::Entry& entry,
                              absl::string_view url) {
  absl::string_view rest = url;
  if (!absl::ConsumePrefix(&rest, "https://") && !absl::ConsumePrefix(&rest, "http://")) {
    return yaml::Fault(reader, entry,
                       absl::StrCat("'", url, "' is not an http:// or https:// URL"));
  }
  if (rest.empty() || rest.front() == '/') {
    return yaml::Fault(reader, entry, absl::StrCat("'", url, "' names no host"));
  }
  for (char c : url) {
    const unsigned char byte = static_cast<unsigned char>(c);
    if (byte <= 0x20 || byte == 0x7f) {
      return yaml::Fault(reader, entry, "must not hold spaces or control characters");
    }
  }
  // File names are appended to it ("/timestamp.json"), so a query or a
  // fragment would swallow them.
  if (url.find_first_of("?#") != absl::string_view::npos) {
    return yaml::Fault(reader, entry,
                       absl::StrCat("'", url,
                                    "' must not have a query or fragment (file names are "
                                    "appended)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TrustConfig> ParseTrustConfig(const yaml::Reader& reader,
                                             const yaml::Entry& entry) {
  ASSIGN_OR_RETURN(const yaml::Map map, yaml::Map::Read(reader, entry, {"metadata_url", "root"}));
  ASSIGN_OR_RETURN(
      const yaml::Entry* root,
      map.Require("root", "required in a trust block (the initial trusted root.json provisioned "
                          "with the device)"));
  ASSIGN_OR_RETURN(const yaml::Entry* metadata_url,
                   map.Require("metadata_url",
                               "required in a trust block (base URL of the signed metadata)"));
  TrustConfig trust;
  ASSIGN_OR_RETURN(trust.root, yaml::ReadNonEmptyString(reader, *root));
  ASSIGN_OR_RETURN(trust.metadata_url, yaml::ReadNonEmptyString(reader, *metadata_url));
  RETURN_IF_ERROR(CheckMetadataUrl(reader, *metadata_url, trust.metadata_url));
  return trust;
}

}  // namespace weightpath::agent
