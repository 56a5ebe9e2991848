#include "common/grpc_status.h"

#include <map>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "common/field_violation.h"
#include "common/retry_pushback.h"
#include "common/text_bounds.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"

namespace weightpath {
namespace {

constexpr char kReceivedFromPayloadUrl[] = "type.weightpath/received-from";

// A status travels in the call's trailers (or its initial metadata when the
// call fails at once), which a client refuses past its metadata limit (gRPC's
// default: 8 KiB). A message quoting what the caller sent (a 5,000-byte
// rollout id) would otherwise reach the client as "received initial metadata
// size exceeds limit" instead of the refusal: the message is cut to
// kMaxStatusMessageBytes, and the details below, sent base64-encoded beside
// it, carry a shorter cut, all three well under that limit.
constexpr size_t kMaxStatusMessageBytes = 2048;
constexpr size_t kMaxStatusDetailsTextBytes = 512;

// The serialized google.rpc.Status for a refusal naming `field`.
std::string StatusDetails(const absl::Status& status, const std::string& field) {
  const std::string text = CutToBytes(status.message(), kMaxStatusDetailsTextBytes);
  google::rpc::BadRequest bad_request;
  google::rpc::BadRequest::FieldViolation* violation = bad_request.add_field_violations();
  violation->set_field(CutToBytes(field, kMaxStatusDetailsTextBytes));
  violation->set_description(text);
  google::rpc::Status details;
  details.set_code(static_cast<int>(status.code()));
  details.set_message(text);
  details.add_details()->PackFrom(bad_request);
  return details.SerializeAsString();
}

// The first field violation in a grpc-status-details-bin value; nullopt
// when there is none or the bytes are not a google.rpc.Status.
std::optional<std::string> FirstViolatedField(const std::string& serialized) {
  if (serialized.empty()) return std::nullopt;
  google::rpc::Status details;
  if (!details.ParseFromString(serialized)) return std::nullopt;
  for (const google::protobuf::Any& detail : details.details()) {
    google::rpc::BadRequest bad_request;
    if (!detail.Is<google::rpc::BadRequest>() || !detail.UnpackTo(&bad_request)) continue;
    if (bad_request.field_violations_size() > 0) return bad_request.field_violations(0).field();
  }
  return std::nullopt;
}

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  const auto code = static_cast<grpc::StatusCode>(status.code());
  std::string message = CutToBytes(status.message(), kMaxStatusMessageBytes);
  if (const std::optional<std::string> field = ViolatedField(status)) {
    return grpc::Status(code, std::move(message), StatusDetails(status, *field));
  }
  return grpc::Status(code, std::move(message));
}

absl::Status FromGrpcStatus(absl::string_view method, const grpc::Status& status,
                            const grpc::ClientContext& context) {
  if (status.ok()) return absl::OkStatus();
  absl::Status result(static_cast<absl::StatusCode>(status.error_code()),
                      absl::StrCat(method, ": ", status.error_message()));
  result.SetPayload(kReceivedFromPayloadUrl, absl::Cord(method));
  if (const std::optional<std::string> field = FirstViolatedField(status.error_details())) {
    result = WithViolatedField(std::move(result), *field);
  }
  const std::multimap<grpc::string_ref, grpc::string_ref>& trailers =
      context.GetServerTrailingMetadata();
  const auto pushback = trailers.find(kRetryPushbackHeader);
  if (pushback != trailers.end()) {
    result = WithRetryPushback(
        std::move(result),
        ParseRetryPushback(absl::string_view(pushback->second.data(), pushback->second.size())));
  }
  return result;
}

std::optional<std::string> ReceivedFrom(const absl::Status& status) {
  if (status.ok()) return std::nullopt;
  const auto method = status.GetPayload(kReceivedFromPayloadUrl);
  if (!method.has_value()) return std::nullopt;
  return std::string(*method);
}

}  // namespace weightpath
