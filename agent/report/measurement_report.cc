#include "agent/report/measurement_report.h"

#include <openssl/sha.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"

namespace weightpath::agent {
namespace {

std::string Sha256Hex(absl::string_view bytes) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), digest);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest), sizeof(digest)));
}

}  // namespace

absl::StatusOr<v1::ReportMeasurementRequest> ParseMeasurementReport(
    absl::string_view json, absl::string_view source_name, absl::string_view device_id) {
  v1::ReportMeasurementRequest request;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  const auto parsed =
      google::protobuf::util::JsonStringToMessage(std::string(json), &request, options);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        source_name, ": not a ReportMeasurementRequest JSON: ", parsed.ToString()));
  }
  if (request.device_id().empty()) {
    if (device_id.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(source_name, ": device_id is missing and the agent config has none"));
    }
    request.set_device_id(std::string(device_id));
  } else if (!device_id.empty() && request.device_id() != device_id) {
    return absl::InvalidArgumentError(
        absl::StrCat(source_name, ": device_id \"", request.device_id(),
                     "\" is not this device (\"", device_id, "\")"));
  }
  if (request.idempotency_key().empty()) {
    // The device id is hashed in too: several devices may send byte-equal
    // files (same benchmark, same figures) and each is its own measurement.
    request.set_idempotency_key(absl::StrCat(
        "sha256:", Sha256Hex(absl::StrCat(request.device_id(), std::string(1, '\0'), json))));
  }
  return request;
}

}  // namespace weightpath::agent
