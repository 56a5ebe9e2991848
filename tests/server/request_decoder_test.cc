// The hot path's request decoder against protobuf's parser: whatever bytes
// come in, a message the decoder accepts is exactly the one protobuf parses,
// and every call starts clean however the previous ones went.
#include "server/wire/request_decoder.h"

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "grpcpp/support/byte_buffer.h"
#include "server/resolve/request_validation.h"
#include "server/wire/resolve_wire.h"
#include "tests/server/example_requests.h"

namespace weightpath::server {
namespace {

using ::google::protobuf::util::MessageDifferencer;

std::vector<v1::ResolveWeightPathRequest> ExampleRequests() {
  std::vector<v1::ResolveWeightPathRequest> requests = testing::ExampleProfileRequests();
  for (v1::ResolveWeightPathRequest& request : requests) {
    request.set_priority(v1::PRIORITY_FIDELITY);
    (*request.mutable_labels())["workload"] = "agentic";
    request.set_agent_version("1.2.3");
  }
  return requests;
}

// The example with the longest flag list.
v1::ResolveWeightPathRequest MostFlags() {
  v1::ResolveWeightPathRequest most;
  for (const v1::ResolveWeightPathRequest& request : ExampleRequests()) {
    if (request.profile().cpu_flags_size() > most.profile().cpu_flags_size()) most = request;
  }
  return most;
}

// Decodes with the decoder and with protobuf; the decoder may decline, but
// when it accepts, protobuf must accept the same message.
void ExpectSameAsProtobuf(RequestDecoder& decoder, v1::ResolveWeightPathRequest& reused,
                          const std::string& wire, bool* accepted = nullptr) {
  decoder.Reset(&reused);
  const bool decoded = decoder.Decode(wire, &reused);
  if (accepted != nullptr) *accepted = decoded;
  if (!decoded) return;
  v1::ResolveWeightPathRequest expected;
  ASSERT_TRUE(expected.ParseFromString(wire)) << "decoder accepted what protobuf refuses";
  std::string differences;
  MessageDifferencer differencer;
  differencer.ReportDifferencesToString(&differences);
  EXPECT_TRUE(differencer.Compare(expected, reused)) << differences;
}

// The whole parse a resolve gets (the decoder, then protobuf whole when it
// declines) against protobuf alone: the same verdict, the same message, and
// a profile present exactly when protobuf has one ("profile is required"
// reads presence).
void ExpectParseResolveRequestSameAsProtobuf(ResolveScratch& scratch, const std::string& wire) {
  grpc::Slice slice(wire);
  grpc::ByteBuffer bytes(&slice, 1);
  const absl::Status status = ParseResolveRequest(&bytes, &scratch);
  v1::ResolveWeightPathRequest expected;
  const bool protobuf_accepts = expected.ParseFromString(wire);
  ASSERT_EQ(status.ok(), protobuf_accepts) << status;
  if (!protobuf_accepts) return;
  EXPECT_EQ(scratch.request.has_profile(), expected.has_profile());
  std::string differences;
  MessageDifferencer differencer;
  differencer.ReportDifferencesToString(&differences);
  EXPECT_TRUE(differencer.Compare(expected, scratch.request)) << differences;
}

// DecodeRequestHead's promise: when it accepts, protobuf parses the request
// exactly when the profile's bytes are a HardwareProfile (the head leaves
// those to the profile memo), and then into the head's top-level values.
void ExpectHeadAsProtobuf(const std::string& wire, bool* accepted = nullptr) {
  RequestHead head;
  const bool decoded = DecodeRequestHead(wire, &head);
  if (accepted != nullptr) *accepted = decoded;
  if (!decoded) return;
  v1::HardwareProfile profile;
  const bool profile_parses = profile.ParseFromArray(head.profile.data(), static_cast<int>(head.profile.size()));
  v1::ResolveWeightPathRequest expected;
  ASSERT_EQ(expected.ParseFromString(wire), profile_parses) << "the head hid a parse failure";
  if (!profile_parses) return;
  EXPECT_TRUE(expected.has_profile());
  EXPECT_EQ(expected.device_id(), head.device_id);
  EXPECT_EQ(expected.model(), head.model);
  EXPECT_EQ(expected.agent_version(), head.agent_version);
  EXPECT_EQ(expected.known_decision_etag(), head.known_decision_etag);
  EXPECT_EQ(expected.priority(), head.priority);
  EXPECT_EQ(expected.dry_run(), head.dry_run);
  EXPECT_LE(static_cast<int>(expected.labels_size()), head.label_count);
  EXPECT_EQ(expected.profile().SerializeAsString(), profile.SerializeAsString());
  for (const auto& [key, value] : expected.labels()) {
    EXPECT_FALSE(key.empty());
    EXPECT_LT(key.size(), 128u);
    EXPECT_LT(value.size(), 128u);
  }
}

TEST(RequestHeadTest, EveryExampleRequestHasAPlainHead) {
  for (v1::ResolveWeightPathRequest request : ExampleRequests()) {
    request.set_known_decision_etag(std::string(32, 'a'));
    bool accepted = false;
    ExpectHeadAsProtobuf(request.SerializeAsString(), &accepted);
    EXPECT_TRUE(accepted) << request.device_id();
  }
}

// A length in more bytes than it needs is still a length to protobuf, up to
// five bytes; the head takes at most three, the decoder what protobuf takes.
TEST(RequestHeadTest, OverlongLengthsAreJudgedAsProtobufJudgesThem) {
  const v1::ResolveWeightPathRequest most = MostFlags();
  v1::ResolveWeightPathRequest rest = most;
  rest.clear_device_id();
  rest.clear_profile();
  rest.set_known_decision_etag(std::string(32, 'b'));
  const std::string profile = most.profile().SerializeAsString();
  // A length-delimited field whose length takes `size` bytes.
  auto field = [](char tag, const std::string& value, int size) {
    std::string bytes(1, tag);
    uint64_t length = value.size();
    for (int i = 0; i < size - 1; ++i) {
      bytes.push_back(static_cast<char>((length & 0x7f) | 0x80));
      length >>= 7;
    }
    bytes.push_back(static_cast<char>(length));
    return bytes + value;
  };
  ResolveScratch scratch;
  RequestDecoder decoder;
  v1::ResolveWeightPathRequest reused;
  for (int size = 1; size <= 7; ++size) {
    SCOPED_TRACE(size);
    for (const bool padded_profile : {false, true}) {
      const std::string wire = field('\x0a', "dev", padded_profile ? 1 : size) +
                               field('\x12', profile, padded_profile ? std::max(size, 2) : 2) +
                               rest.SerializeAsString();
      bool head_accepted = false;
      ExpectHeadAsProtobuf(wire, &head_accepted);
      EXPECT_EQ(head_accepted, (padded_profile ? std::max(size, 2) : size) <= 3);
      ExpectSameAsProtobuf(decoder, reused, wire);
      ExpectParseResolveRequestSameAsProtobuf(scratch, wire);
    }
    // The profile's tag (2, length-delimited) in `size` bytes: protobuf
    // reads tags of up to five.
    std::string tag(1, '\x12');
    if (size > 1) {
      tag[0] = '\x92';
      for (int i = 2; i < size; ++i) tag.push_back('\x80');
      tag.push_back('\x00');
    }
    const std::string profile_field = field('\x12', profile, 2);
    const std::string wire =
        field('\x0a', "dev", 1) + tag + profile_field.substr(1) + rest.SerializeAsString();
    bool head_accepted = false;
    ExpectHeadAsProtobuf(wire, &head_accepted);
    EXPECT_EQ(head_accepted, size == 1);
    ExpectSameAsProtobuf(decoder, reused, wire);
    ExpectParseResolveRequestSameAsProtobuf(scratch, wire);
  }
}

// dry_run (field 8, a bool) as every encoder writes it takes the head;
// every other encoding of it is left to protobuf, and a broken one is
// refused as protobuf refuses it.
TEST(RequestHeadTest, DryRunIsReadAsProtobufReadsIt) {
  ResolveScratch scratch;
  RequestDecoder decoder;
  v1::ResolveWeightPathRequest reused;
  v1::ResolveWeightPathRequest request = MostFlags();
  request.set_dry_run(true);
  const std::string plain = request.SerializeAsString();
  ASSERT_NE(plain.find(std::string("\x40\x01", 2)), std::string::npos);
  RequestHead head;
  ASSERT_TRUE(DecodeRequestHead(plain, &head));
  EXPECT_TRUE(head.dry_run);
  ExpectHeadAsProtobuf(plain);
  ExpectSameAsProtobuf(decoder, reused, plain);
  ExpectParseResolveRequestSameAsProtobuf(scratch, plain);
  EXPECT_TRUE(scratch.request.dry_run());

  request.set_dry_run(false);
  const std::string without = request.SerializeAsString();
  ASSERT_TRUE(DecodeRequestHead(without, &head));
  EXPECT_FALSE(head.dry_run);

  struct Case {
    const char* what;
    std::string field;  // appended to a request without dry_run
    bool head_accepts;
    bool protobuf_accepts;
    bool dry_run;       // protobuf's value when it accepts
  };
  const std::vector<Case> cases = {
      {"false written out", std::string("\x40\x00", 2), true, true, false},
      {"true as 2", std::string("\x40\x02", 2), false, true, true},
      {"true in two bytes", std::string("\x40\x81\x00", 3), false, true, true},
      {"sent twice, the last wins", std::string("\x40\x01\x40\x00", 4), false, true, false},
      {"a varint cut short", std::string("\x40\x80", 2), false, false, false},
      {"a tag with no value", std::string("\x40", 1), false, false, false},
      {"a length-delimited field 8", std::string("\x42\x01\x01", 3), false, true, false},
      {"a length past the end", std::string("\x42\x05\x01", 3), false, false, false},
      {"a varint of eleven bytes", std::string("\x40") + std::string(10, '\xff') + "\x01",
       false, false, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const std::string wire = without + c.field;
    bool head_accepted = false;
    ExpectHeadAsProtobuf(wire, &head_accepted);
    EXPECT_EQ(head_accepted, c.head_accepts);
    ExpectSameAsProtobuf(decoder, reused, wire);
    ExpectParseResolveRequestSameAsProtobuf(scratch, wire);
    grpc::Slice slice(wire);
    grpc::ByteBuffer bytes(&slice, 1);
    const absl::Status parsed = ParseResolveRequest(&bytes, &scratch);
    EXPECT_EQ(parsed.ok(), c.protobuf_accepts) << parsed;
    if (parsed.ok()) {
      EXPECT_EQ(scratch.request.dry_run(), c.dry_run);
    } else {
      EXPECT_EQ(parsed.code(), absl::StatusCode::kInvalidArgument);
      EXPECT_NE(parsed.message().find("ResolveWeightPathRequest"), absl::string_view::npos);
    }
  }
}

TEST(RequestDecoderTest, EveryExampleProfileDecodesAsProtobufParsesIt) {
  RequestDecoder decoder;
  v1::ResolveWeightPathRequest reused;
  for (const v1::ResolveWeightPathRequest& request : ExampleRequests()) {
    bool accepted = false;
    ExpectSameAsProtobuf(decoder, reused, request.SerializeAsString(), &accepted);
    EXPECT_TRUE(accepted) << request.device_id() << " took the slow path";
  }
}

TEST(RequestDecoderTest, LongFlagsAndBigClustersTakeTheFastPath) {
  v1::ResolveWeightPathRequest request = MostFlags();
  request.mutable_profile()->add_cpu_flags(std::string(200, 'x'));  // two-byte length
  v1::CpuCluster* cluster = request.mutable_profile()->add_clusters();
  cluster->set_max_khz(1'000'000'000'000ull);
  for (uint32_t cpu = 0; cpu < 2000; ++cpu) cluster->add_cpus(cpu * 1000);
  RequestDecoder decoder;
  v1::ResolveWeightPathRequest reused;
  bool accepted = false;
  ExpectSameAsProtobuf(decoder, reused, request.SerializeAsString(), &accepted);
  EXPECT_TRUE(accepted);
  EXPECT_EQ(decoder.cached_cluster_lists(), 1);
}

TEST(RequestDecoderTest, AlternatingFlagListsNeverLeakIntoEachOther) {
  // More distinct lists than the cache keeps, in an order that reuses and
  // evicts entries, each checked against protobuf.
  std::vector<v1::ResolveWeightPathRequest> requests = ExampleRequests();
  for (int variant = 0; variant < 6; ++variant) {
    v1::ResolveWeightPathRequest extra = requests[variant % 2];
    extra.mutable_profile()->add_cpu_flags(absl::StrCat("extra_flag_", variant));
    extra.mutable_profile()->add_clusters()->add_cpus(static_cast<uint32_t>(1000 + variant));
    requests.push_back(std::move(extra));
  }
  RequestDecoder decoder;
  v1::ResolveWeightPathRequest reused;
  std::mt19937 random(7);
  for (int call = 0; call < 400; ++call) {
    const auto& request = requests[random() % requests.size()];
    ExpectSameAsProtobuf(decoder, reused, request.SerializeAsString());
  }
  EXPECT_EQ(decoder.cached_flag_lists(), 8);
  EXPECT_EQ(decoder.cached_cluster_lists(), 8);
}

TEST(RequestDecoderTest, DeclinesWhatOnlyProtobufShouldJudge) {
  const v1::ResolveWeightPathRequest base = MostFlags();
  RequestDecoder decoder;
  v1::ResolveWeightPathRequest reused;

  v1::ResolveWeightPathRequest non_ascii = base;
  non_ascii.mutable_profile()->add_cpu_flags("caf\xc3\xa9");  // valid UTF-8, not ASCII
  bool accepted = true;
  ExpectSameAsProtobuf(decoder, reused, non_ascii.SerializeAsString(), &accepted);
  EXPECT_FALSE(accepted);

  // Flags and clusters split into two runs by another field: protobuf
  // appends them; the decoder leaves that to it.
  v1::HardwareProfile split;
  split.add_cpu_flags("avx2");
  split.add_clusters()->add_cpus(0);
  split.set_arch("x86_64");
  std::string split_profile = split.SerializeAsString() + split.SerializeAsString();
  v1::ResolveWeightPathRequest holder;
  holder.set_device_id("d1");
  std::string split_wire = holder.SerializeAsString() + "\x12";
  split_wire.push_back(static_cast<char>(split_profile.size()));
  split_wire += split_profile;
  ExpectSameAsProtobuf(decoder, reused, split_wire, &accepted);
  EXPECT_FALSE(accepted);

  // Flags in two runs: the profile sent twice (protobuf merges the two).
  v1::ResolveWeightPathRequest first;
  first.mutable_profile()->add_cpu_flags("avx2");
  v1::ResolveWeightPathRequest second = base;
  ExpectSameAsProtobuf(decoder, reused, first.SerializeAsString() + second.SerializeAsString(),
                       &accepted);
  EXPECT_FALSE(accepted);

  // After declining, the next ordinary request decodes cleanly.
  ExpectSameAsProtobuf(decoder, reused, base.SerializeAsString(), &accepted);
  EXPECT_TRUE(accepted);
}

TEST(RequestDecoderTest, FieldsInAnyOrderAndUnknownFieldsMatchProtobuf) {
  const v1::ResolveWeightPathRequest base = MostFlags();
  // Reversed top-level order, an unknown field (number 99), and the profile's
  // flags after its other fields.
  v1::ResolveWeightPathRequest tail = base;
  tail.clear_profile();
  v1::HardwareProfile flags_only;
  *flags_only.mutable_cpu_flags() = base.profile().cpu_flags();
  v1::HardwareProfile without_flags = base.profile();
  without_flags.clear_cpu_flags();
  const std::string profile_bytes = without_flags.SerializeAsString() + flags_only.SerializeAsString();
  std::string wire;
  wire += tail.SerializeAsString();
  wire += std::string("\x9a\x06\x03", 3) + "abc";  // field 99, length 3
  wire += "\x12";                                   // field 2 (profile), length-delimited
  uint64_t length = profile_bytes.size();
  while (length >= 0x80) {
    wire.push_back(static_cast<char>(length | 0x80));
    length >>= 7;
  }
  wire.push_back(static_cast<char>(length));
  wire += profile_bytes;

  RequestDecoder decoder;
  v1::ResolveWeightPathRequest reused;
  bool accepted = false;
  ExpectSameAsProtobuf(decoder, reused, wire, &accepted);
  EXPECT_TRUE(accepted);
}

TEST(RequestDecoderTest, DamagedBytesAreNeverAcceptedDifferently) {
  const std::vector<v1::ResolveWeightPathRequest> requests = ExampleRequests();
  RequestDecoder decoder;
  v1::ResolveWeightPathRequest reused;
  ResolveScratch scratch;
  std::mt19937 random(11);
  for (int trial = 0; trial < 3000; ++trial) {
    v1::ResolveWeightPathRequest request = requests[trial % requests.size()];
    if (trial % 2 == 0) request.set_known_decision_etag(std::string(32, 'c'));
    if (trial % 3 == 0) request.set_dry_run(true);
    std::string wire = request.SerializeAsString();
    const int edits = 1 + static_cast<int>(random() % 4);
    for (int edit = 0; edit < edits; ++edit) {
      switch (random() % 3) {
        case 0:
          wire[random() % wire.size()] = static_cast<char>(random());
          break;
        case 1:
          wire.resize(random() % wire.size());
          break;
        default:
          wire.insert(random() % (wire.size() + 1), 1, static_cast<char>(random()));
      }
      if (wire.empty()) break;
    }
    ExpectSameAsProtobuf(decoder, reused, wire);
    ExpectParseResolveRequestSameAsProtobuf(scratch, wire);
    ExpectHeadAsProtobuf(wire);
    if (::testing::Test::HasFailure()) {
      ADD_FAILURE() << "trial " << trial;
      return;
    }
  }
}

TEST(ParseResolveRequestTest, RefusesGarbageAndKeepsProfilePresenceExact) {
  ResolveScratch scratch;
  // A good request first, so a failed parse could leave its id behind.
  v1::ResolveWeightPathRequest good = MostFlags();
  const std::string good_wire = good.SerializeAsString();
  grpc::Slice good_slice(good_wire);
  grpc::ByteBuffer good_bytes(&good_slice, 1);
  ASSERT_TRUE(ParseResolveRequest(&good_bytes, &scratch).ok());
  // A valid start (device_id "d9") followed by bytes no parser accepts.
  const std::string garbage = std::string("\x0a\x02" "d9", 4) + "\xff\xff\xff";
  grpc::Slice garbage_slice(garbage);
  grpc::ByteBuffer garbage_bytes(&garbage_slice, 1);
  const absl::Status refused = ParseResolveRequest(&garbage_bytes, &scratch);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("ResolveWeightPathRequest"), absl::string_view::npos);
  // Nothing of either request is left to be logged as this call's.
  EXPECT_EQ(scratch.request.device_id(), "");
  EXPECT_EQ(scratch.request.profile().cpu_flags_size(), 0);

  v1::ResolveWeightPathRequest empty_profile;
  empty_profile.set_device_id("d1");
  empty_profile.mutable_profile();
  const std::string wire = empty_profile.SerializeAsString();
  grpc::Slice slice(wire);
  grpc::ByteBuffer bytes(&slice, 1);
  ASSERT_TRUE(ParseResolveRequest(&bytes, &scratch).ok());
  EXPECT_TRUE(scratch.request.has_profile());
  EXPECT_EQ(scratch.request.device_id(), "d1");

  v1::ResolveWeightPathRequest no_profile;
  no_profile.set_device_id("d2");
  const std::string no_profile_wire = no_profile.SerializeAsString();
  grpc::Slice no_profile_slice(no_profile_wire);
  grpc::ByteBuffer no_profile_bytes(&no_profile_slice, 1);
  ASSERT_TRUE(ParseResolveRequest(&no_profile_bytes, &scratch).ok());
  EXPECT_FALSE(scratch.request.has_profile());
  EXPECT_EQ(scratch.request.device_id(), "d2");
}

TEST(ParseResolveRequestTest, DeclinedRequestsAreExactlyProtobufsProfileIncluded) {
  // A field the decoder leaves to protobuf (an unknown group, field 15),
  // after a request with a profile so a kept one could be left attached.
  const std::string odd_field("\x7b\x7c", 2);
  v1::ResolveWeightPathRequest no_profile;
  no_profile.set_device_id("d3");
  const std::string no_profile_wire = no_profile.SerializeAsString() + odd_field;
  const std::string with_profile_wire = MostFlags().SerializeAsString() + odd_field;

  RequestDecoder decoder;
  v1::ResolveWeightPathRequest reused;
  bool accepted = true;
  ExpectSameAsProtobuf(decoder, reused, no_profile_wire, &accepted);
  ASSERT_FALSE(accepted) << "the case below must exercise the fallback";

  ResolveScratch scratch;
  for (const std::string& wire :
       {MostFlags().SerializeAsString(), no_profile_wire, with_profile_wire, no_profile_wire,
        MostFlags().SerializeAsString(), no_profile.SerializeAsString()}) {
    ExpectParseResolveRequestSameAsProtobuf(scratch, wire);
  }
  ExpectParseResolveRequestSameAsProtobuf(scratch, no_profile_wire);
  EXPECT_FALSE(scratch.request.has_profile());
  EXPECT_EQ(scratch.request.device_id(), "d3");
  const absl::Status refused = ValidateResolveRequest(scratch.request);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.message(), "profile is required");
}

}  // namespace
}  // namespace weightpath::server
