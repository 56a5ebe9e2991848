// The response on the wire is what every protobuf implementation reads the
// same way: each singular field at most once at every nesting level, in the
// order and form protobuf's own serializer writes. A decoder that replaces a
// repeated sub-message instead of merging it (protobufjs) must see the whole
// decision. Checked for every example profile at every priority, with and
// without rollouts shaping the call, with and without fleet evidence.
#include <map>
#include <string>
#include <vector>

#include "common/deterministic_bytes.h"
#include "policy/hardware_class.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/unknown_field_set.h"
#include "google/protobuf/util/message_differencer.h"
#include "grpcpp/support/byte_buffer.h"
#include "gtest/gtest.h"
#include "server/config_watcher.h"
#include "server/wire/resolve_wire.h"
#include "server/resolve/resolver.h"
#include "server/wire/response_cache.h"
#include "tests/server/example_requests.h"

namespace weightpath::server {
namespace {

using ::google::protobuf::Descriptor;
using ::google::protobuf::FieldDescriptor;
using ::google::protobuf::UnknownField;
using ::google::protobuf::UnknownFieldSet;
using ::google::protobuf::util::MessageDifferencer;

std::string Flatten(const grpc::ByteBuffer& bytes) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(bytes.Dump(&slices).ok());
  std::string wire;
  for (const grpc::Slice& slice : slices) {
    wire.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  return wire;
}

// Fails for every singular field of `type` that `wire` carries more than
// once, at this level and in every sub-message below it.
void ExpectEachSingularFieldOnce(const std::string& wire, const Descriptor& type,
                                 const std::string& where) {
  UnknownFieldSet fields;
  ASSERT_TRUE(fields.ParseFromString(wire)) << where;
  std::map<int, int> occurrences;
  for (int i = 0; i < fields.field_count(); ++i) {
    const UnknownField& field = fields.field(i);
    ++occurrences[field.number()];
    const FieldDescriptor* descriptor = type.FindFieldByNumber(field.number());
    ASSERT_NE(descriptor, nullptr) << where << ": field " << field.number() << " is not in "
                                   << type.full_name();
    if (descriptor->type() == FieldDescriptor::TYPE_MESSAGE) {
      ASSERT_EQ(field.type(), UnknownField::TYPE_LENGTH_DELIMITED);
      ExpectEachSingularFieldOnce(field.length_delimited(), *descriptor->message_type(),
                                  where + "." + descriptor->name());
    }
  }
  for (const auto& [number, count] : occurrences) {
    const FieldDescriptor* descriptor = type.FindFieldByNumber(number);
    if (!descriptor->is_repeated()) {
      EXPECT_EQ(count, 1) << where << "." << descriptor->name() << " appears " << count
                          << " times";
    }
  }
}

std::vector<v1::ResolveWeightPathRequest> ExampleRequests() {
  std::vector<v1::ResolveWeightPathRequest> requests;
  for (const v1::ResolveWeightPathRequest& base : testing::ExampleProfileRequests()) {
    for (v1::Priority priority :
         {v1::PRIORITY_UNSPECIFIED, v1::PRIORITY_SPEED, v1::PRIORITY_FIDELITY}) {
      requests.push_back(base);
      requests.back().set_priority(priority);
      (*requests.back().mutable_labels())["workload"] = "agentic";
    }
  }
  return requests;
}

v1::Rollout AtFullStage(v1::Rollout rollout) {
  rollout.mutable_selector()->set_all(true);
  rollout.add_stages()->set_percent(100);
  rollout.set_state(v1::ROLLOUT_STATE_PROGRESSING);
  rollout.set_current_stage(0);
  return rollout;
}

// No rollout; one that moves every device to fidelity; one that pins an
// artifact of its own (replacing the catalog's).
std::vector<std::vector<v1::Rollout>> RolloutSets() {
  v1::Rollout fidelity;
  fidelity.set_id("fidelity-everywhere");
  fidelity.mutable_action()->set_set_priority(v1::PRIORITY_FIDELITY);
  v1::Rollout pinned;
  pinned.set_id("pinned-build");
  v1::PinnedArtifact* pin = pinned.mutable_action()->mutable_pin_artifact();
  pin->set_path("w4a16-tinygemm");
  pin->mutable_artifact()->set_uri("https://mirror.example/w4a16-tinygemm-rc2.tar");
  pin->mutable_artifact()->set_sha256(std::string(64, 'a'));
  pin->mutable_artifact()->set_size_bytes(123456);
  pin->mutable_artifact()->set_version("rc2");
  return {{}, {AtFullStage(fidelity)}, {AtFullStage(pinned)}};
}

class ResponseWireTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto snapshot = LoadSnapshot({});
    ASSERT_TRUE(snapshot.ok()) << snapshot.status();
    holder_ = std::make_unique<SnapshotHolder>(*snapshot);
  }

  // The hot path's answer as wire bytes, and Resolve's for the same call.
  struct Answers {
    std::string wire;
    v1::ResolveWeightPathResponse expected;
  };
  Answers Answer(const v1::ResolveWeightPathRequest& request,
                 const std::vector<v1::Rollout>& rollouts, bool fleet_evidence) {
    Answers answers;
    const auto pinned_snapshot = holder_->Current();
    const Snapshot& snapshot = *pinned_snapshot;
    ResolveSummary summary;
    absl::StatusOr<ResolvedDecision> decision = Decide(request, snapshot, &summary, rollouts);
    EXPECT_TRUE(decision.ok()) << decision.status();
    if (!decision.ok()) return answers;
    const DecidedPart& decided = cache_.Find(*holder_, snapshot, *decision);
    v1::ResolveWeightPathResponse per_call;
    FillPerCallPart(*decision, &per_call);
    per_call.set_decision_etag(decided.EtagFor(per_call));
    if (fleet_evidence) SetFleetEvidence(per_call.mutable_weight_path());
    grpc::ByteBuffer bytes;
    EncodeResolveResponse(decided.encoded, per_call, &bytes);
    answers.wire = Flatten(bytes);

    EXPECT_TRUE(Resolve(request, snapshot, &answers.expected, &summary, rollouts).ok());
    if (fleet_evidence) SetFleetEvidence(answers.expected.mutable_weight_path());
    return answers;
  }

  // What FleetState::ApplyVerification writes when enough devices reported.
  static void SetFleetEvidence(v1::WeightPathSpec* spec) {
    spec->set_verified(true);
    spec->mutable_verification()->set_source(v1::Verification::SOURCE_FLEET);
    spec->mutable_verification()->set_device_count(7);
    spec->mutable_verification()->set_reason("7 devices of this class reported it");
  }

  std::unique_ptr<SnapshotHolder> holder_;
  DecidedPartCache cache_;
};

TEST_F(ResponseWireTest, EverySingularFieldAppearsOnceAsProtobufWritesIt) {
  int checked = 0;
  for (const std::vector<v1::Rollout>& rollouts : RolloutSets()) {
    for (bool fleet_evidence : {false, true}) {
      for (const v1::ResolveWeightPathRequest& request : ExampleRequests()) {
        const std::string where = request.device_id() + " priority " +
                                  std::to_string(request.priority()) + " rollouts " +
                                  std::to_string(rollouts.size()) +
                                  (fleet_evidence ? " fleet evidence" : "");
        const Answers answers = Answer(request, rollouts, fleet_evidence);
        ExpectEachSingularFieldOnce(answers.wire, *v1::ResolveWeightPathResponse::descriptor(),
                                    where);
        v1::ResolveWeightPathResponse parsed;
        ASSERT_TRUE(parsed.ParseFromString(answers.wire)) << where;
        // Byte for byte what protobuf writes for the message it reads.
        EXPECT_EQ(answers.wire, DeterministicBytes(parsed)) << where;
        std::string differences;
        MessageDifferencer differencer;
        differencer.ReportDifferencesToString(&differences);
        EXPECT_TRUE(differencer.Compare(answers.expected, parsed)) << where << ": " << differences;
        EXPECT_FALSE(parsed.weight_path().name().empty()) << where;
        EXPECT_FALSE(parsed.weight_path().rationale().empty()) << where;
        EXPECT_EQ(parsed.decision_etag().size(), 32u) << where;
        EXPECT_FALSE(parsed.unchanged()) << where;
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 3 * 2 * 24);
}

// The server's retry schedule for failed builds is per call (its flag), not
// part of the cached decided bytes: the hand encoder must still write it.
TEST_F(ResponseWireTest, TheServersFailedBuildRetryReachesTheWire) {
  deploy::ResolveIntervalSettings intervals;
  intervals.failed_build_retry = absl::Hours(1);
  const auto pinned_snapshot = holder_->Current();
  const v1::ResolveWeightPathRequest request = ExampleRequests().front();
  absl::StatusOr<policy::HardwareClass> hardware_class = policy::ClassifyHardware(request.profile());
  ASSERT_TRUE(hardware_class.ok()) << hardware_class.status();
  ResolveSummary summary;
  absl::StatusOr<ResolvedDecision> decision =
      Decide(request, *hardware_class, *pinned_snapshot, &summary, {}, intervals);
  ASSERT_TRUE(decision.ok()) << decision.status();
  const DecidedPart& decided = cache_.Find(*holder_, *pinned_snapshot, *decision);
  v1::ResolveWeightPathResponse per_call;
  FillPerCallPart(*decision, &per_call);
  per_call.set_decision_etag(decided.EtagFor(per_call));
  grpc::ByteBuffer bytes;
  EncodeResolveResponse(decided.encoded, per_call, &bytes);
  const std::string wire = Flatten(bytes);
  v1::ResolveWeightPathResponse parsed;
  ASSERT_TRUE(parsed.ParseFromString(wire));
  EXPECT_EQ(parsed.failed_build_retry_seconds(), 3600u);
  EXPECT_EQ(wire, DeterministicBytes(parsed));
  ExpectEachSingularFieldOnce(wire, *v1::ResolveWeightPathResponse::descriptor(), "retry");
}

TEST(UnchangedResponseTest, IsWhatProtobufWritesForTheFourFields) {
  for (uint32_t interval : {0u, 300u, 86400u}) {
    for (const std::string& version : {std::string(), std::string("sha256:1f6c16d161595a03")}) {
      v1::ResolveWeightPathResponse expected;
      expected.set_policy_version(version);
      expected.set_resolve_interval_seconds(interval);
      expected.set_decision_etag("7b2efed30fbb778f70b84d78411d6da9");
      expected.set_unchanged(true);
      grpc::ByteBuffer bytes;
      EncodeUnchangedResponse(version, interval, expected.decision_etag(), &bytes);
      const std::string wire = Flatten(bytes);
      EXPECT_EQ(wire, DeterministicBytes(expected)) << interval << " " << version;
      EXPECT_LE(wire.size(), 120u);
    }
  }
}

TEST_F(ResponseWireTest, RolloutsThatShapeTheCallChangeTheEtag) {
  const v1::ResolveWeightPathRequest request = ExampleRequests().front();
  const std::vector<std::vector<v1::Rollout>> sets = RolloutSets();
  v1::ResolveWeightPathResponse plain, pinned, again;
  ASSERT_TRUE(plain.ParseFromString(Answer(request, sets[0], false).wire));
  ASSERT_TRUE(pinned.ParseFromString(Answer(request, sets[2], false).wire));
  ASSERT_TRUE(again.ParseFromString(Answer(request, sets[0], true).wire));
  EXPECT_NE(plain.decision_etag(), pinned.decision_etag());
  // Fleet evidence is per call, not something the device acts on.
  EXPECT_EQ(plain.decision_etag(), again.decision_etag());
}

}  // namespace
}  // namespace weightpath::server
