// absl::Status <-> grpc::Status: codes and messages carried over, the named
// field as a google.rpc.BadRequest detail and back, the retry pushback, and
// details that are not ours ignored.
#include "common/grpc_status.h"

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "common/field_violation.h"
#include "common/retry_pushback.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "gtest/gtest.h"

namespace weightpath {
namespace {

TEST(GrpcStatus, OkIsOk) {
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
  grpc::ClientContext context;
  EXPECT_TRUE(FromGrpcStatus("Call", grpc::Status::OK, context).ok());
}

TEST(GrpcStatus, CodeAndMessageCarryOverWithoutDetails) {
  const grpc::Status sent = ToGrpcStatus(absl::NotFoundError("model 'x' is not served"));
  EXPECT_EQ(sent.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(sent.error_message(), "model 'x' is not served");
  EXPECT_TRUE(sent.error_details().empty());

  grpc::ClientContext context;
  const absl::Status received = FromGrpcStatus("ResolveWeightPath", sent, context);
  EXPECT_EQ(received.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(received.message(), "ResolveWeightPath: model 'x' is not served");
  EXPECT_EQ(ViolatedField(received), std::nullopt);
}

TEST(GrpcStatus, AReceivedStatusSaysWhichCallItCameFrom) {
  grpc::ClientContext context;
  const absl::Status refused = FromGrpcStatus(
      "PauseRollout", grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no such stage"), context);
  EXPECT_EQ(ReceivedFrom(refused), "PauseRollout");
  // The same code made locally did not come from a call.
  EXPECT_EQ(ReceivedFrom(absl::InvalidArgumentError("no such stage")), std::nullopt);
  EXPECT_EQ(ReceivedFrom(absl::OkStatus()), std::nullopt);
}

TEST(GrpcStatus, TheNamedFieldIsABadRequestDetail) {
  const absl::Status refused =
      InvalidArgumentForField("profile.arch", "profile.arch 'riscv64' is neither x86_64 nor aarch64");
  EXPECT_EQ(refused.message(), "profile.arch 'riscv64' is neither x86_64 nor aarch64");
  const grpc::Status sent = ToGrpcStatus(refused);
  EXPECT_EQ(sent.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(sent.error_message(), refused.message());

  google::rpc::Status details;
  ASSERT_TRUE(details.ParseFromString(sent.error_details()));
  EXPECT_EQ(details.code(), static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
  EXPECT_EQ(details.message(), refused.message());
  ASSERT_EQ(details.details_size(), 1);
  EXPECT_EQ(details.details(0).type_url(), "type.googleapis.com/google.rpc.BadRequest");
  google::rpc::BadRequest bad_request;
  ASSERT_TRUE(details.details(0).UnpackTo(&bad_request));
  ASSERT_EQ(bad_request.field_violations_size(), 1);
  EXPECT_EQ(bad_request.field_violations(0).field(), "profile.arch");
  EXPECT_EQ(bad_request.field_violations(0).description(), refused.message());

  grpc::ClientContext context;
  const absl::Status received = FromGrpcStatus("ResolveWeightPath", sent, context);
  EXPECT_EQ(received.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ViolatedField(received), "profile.arch");
}

// A refusal quoting what the caller sent (a 5,000-byte rollout id) travels
// in metadata, which clients refuse past 8 KiB: message and details are cut,
// saying how much was left out, and the field is still named.
TEST(GrpcStatus, ALongMessageIsCutToFitTheClientsMetadataLimit) {
  const std::string id(5000, 'a');
  const absl::Status refused =
      InvalidArgumentForField("rollout.id", "rollout.id: '" + id + "' is not allowed");
  const grpc::Status sent = ToGrpcStatus(refused);
  EXPECT_EQ(sent.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_LE(sent.error_message().size(), 2048u + 32u);
  EXPECT_EQ(sent.error_message().rfind("rollout.id: 'aaa", 0), 0u);
  EXPECT_NE(sent.error_message().find(" bytes)"), std::string::npos);
  // Message, details and their base64 (4/3) together stay under 8 KiB.
  EXPECT_LT(sent.error_message().size() + sent.error_details().size() * 4 / 3, 8192u - 1024u);
  google::rpc::Status details;
  ASSERT_TRUE(details.ParseFromString(sent.error_details()));
  EXPECT_LE(details.message().size(), 512u + 32u);
  grpc::ClientContext context;
  EXPECT_EQ(ViolatedField(FromGrpcStatus("CreateRollout", sent, context)), "rollout.id");
  // A message within the bound is sent whole.
  EXPECT_EQ(ToGrpcStatus(absl::InvalidArgumentError(std::string(2048, 'b'))).error_message(),
            std::string(2048, 'b'));
}

TEST(GrpcStatus, AFieldOnAnotherCodeIsCarriedToo) {
  const absl::Status refused =
      WithViolatedField(absl::FailedPreconditionError("rollout r1 is aborted"), "id");
  grpc::ClientContext context;
  const absl::Status received = FromGrpcStatus("PauseRollout", ToGrpcStatus(refused), context);
  EXPECT_EQ(received.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ViolatedField(received), "id");
}

TEST(GrpcStatus, DetailsThatAreNotABadRequestAreIgnored) {
  grpc::ClientContext context;
  const absl::Status garbage = FromGrpcStatus(
      "Call", grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "bad", "\xff\xff not a proto"),
      context);
  EXPECT_EQ(garbage.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(garbage.message(), "Call: bad");
  EXPECT_EQ(ViolatedField(garbage), std::nullopt);

  google::rpc::Status other;
  other.set_code(3);
  google::rpc::RetryInfo retry_info;
  other.add_details()->PackFrom(retry_info);
  const absl::Status unrelated = FromGrpcStatus(
      "Call", grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "bad", other.SerializeAsString()),
      context);
  EXPECT_EQ(ViolatedField(unrelated), std::nullopt);
}

TEST(GrpcStatus, ARetryPushbackIsNotADetail) {
  const absl::Status shed =
      WithRetryPushback(absl::ResourceExhaustedError("over --device_rate_limit"), absl::Seconds(2));
  EXPECT_TRUE(ToGrpcStatus(shed).error_details().empty());
}

}  // namespace
}  // namespace weightpath
