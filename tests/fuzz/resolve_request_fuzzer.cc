// ResolveWeightPath as the server serves it, from the request's raw bytes:
// the hand decoder (ParseResolveRequest, with protobuf as its fallback),
// validation, the decision against the embedded policy and demo catalog
// with two rollouts in force, the cached decided part and the response
// written on the wire.
//
// Differential properties:
//  - ParseResolveRequest accepts exactly what protobuf's parser accepts,
//    into exactly the message protobuf parses (the decoder's kept runs carry
//    over from one input to the next, as on a server thread);
//  - the decoder alone, when it accepts, agrees with protobuf too;
//  - the request head (DecodeRequestHead, what the profile memo and
//    dry_run are read from), when it accepts, holds protobuf's top-level
//    values, dry_run included, and hides no parse failure;
//  - the bytes written for the response are the deterministic serialization
//    of the response Resolve builds as one message, etag included, and the
//    "unchanged" answer parses to exactly its four fields.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/deterministic_bytes.h"
#include "ctl/rollout_yaml.h"
#include "deploy/rollout_validation.h"
#include "google/protobuf/util/message_differencer.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "server/config_watcher.h"
#include "server/config/policy_snapshot.h"
#include "server/wire/request_decoder.h"
#include "server/resolve/request_validation.h"
#include "server/wire/resolve_wire.h"
#include "server/resolve/resolver.h"
#include "server/wire/response_cache.h"
#include "tests/fuzz/fuzz_support.h"

namespace weightpath::fuzz {
namespace {

using google::protobuf::util::MessageDifferencer;

// A set_priority rollout for agentic devices, half-way, and a pin_path one
// for x86 CPUs labelled canary, complete: shaping by priority and by path.
constexpr char kRollouts[][400] = {
    R"(id: agentic-fidelity
selector: {match_labels: {workload: agentic}}
action: {set_priority: PRIORITY_FIDELITY}
stages:
  - {percent: 50, min_bake_seconds: 60, min_reporting_devices: 1, report_timeout_seconds: 60}
  - {percent: 100, min_bake_seconds: 60, min_reporting_devices: 1, report_timeout_seconds: 60}
precedence: 10
)",
    R"(id: canary-tinygemm
selector: {match_labels: {ring: canary}, hardware_classes: [x86_cpu]}
action: {pin_path: w4a16-tinygemm-x86}
stages:
  - {percent: 100, min_bake_seconds: 60, min_reporting_devices: 1, report_timeout_seconds: 60}
precedence: 20
)"};

struct Fixture {
  std::shared_ptr<const server::Snapshot> snapshot;
  std::unique_ptr<server::SnapshotHolder> holder;
  std::vector<v1::Rollout> rollouts;
};

const Fixture& GetFixture() {
  static const Fixture* const fixture = [] {
    auto* f = new Fixture;
    auto loaded = server::LoadSnapshot(server::ConfigSources{});
    FUZZ_CHECK(loaded.ok(), loaded.status().ToString());
    f->snapshot = *loaded;
    f->holder = std::make_unique<server::SnapshotHolder>(f->snapshot);
    for (const char* text : kRollouts) {
      auto spec = ctl::ParseRolloutYaml(text, "fixture-rollout.yaml");
      FUZZ_CHECK(spec.ok(), spec.status().ToString());
      auto started = deploy::StartRollout(*spec, *f->snapshot->policy, absl::FromUnixSeconds(1700000000));
      FUZZ_CHECK(started.ok(), started.status().ToString());
      f->rollouts.push_back(*started);
    }
    return f;
  }();
  return *fixture;
}

std::string Differences(const google::protobuf::Message& a, const google::protobuf::Message& b) {
  std::string differences;
  MessageDifferencer differencer;
  differencer.ReportDifferencesToString(&differences);
  return differencer.Compare(a, b) ? std::string() : differences;
}

std::string Flatten(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  FUZZ_CHECK(buffer.Dump(&slices).ok(), "response buffer cannot be read");
  std::string bytes;
  for (const grpc::Slice& slice : slices) {
    bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  return bytes;
}

void CheckResponse(const v1::ResolveWeightPathRequest& request) {
  const Fixture& fixture = GetFixture();
  const auto pinned_snapshot = fixture.holder->Current();
  const server::Snapshot& snapshot = *pinned_snapshot;
  server::ResolveSummary summary;
  absl::StatusOr<server::ResolvedDecision> decision =
      server::Decide(request, snapshot, &summary, fixture.rollouts);

  v1::ResolveWeightPathResponse whole;
  server::ResolveSummary whole_summary;
  const absl::Status resolved =
      server::Resolve(request, snapshot, &whole, &whole_summary, fixture.rollouts);
  FUZZ_CHECK(resolved.code() == decision.status().code(), "Decide and Resolve disagree");
  if (!decision.ok()) {
    // An unknown model is NOT_FOUND; everything else the request can do
    // wrong was refused by validation already.
    FUZZ_CHECK(decision.status().code() == absl::StatusCode::kNotFound,
               absl::StrCat("a validated request failed to decide: ", decision.status().ToString()));
    return;
  }

  // What the service does: the thread's cached decided part, the per-call
  // part, the etag, then the wire bytes.
  const server::DecidedPart& decided =
      server::ThreadDecidedPartCache().Find(*fixture.holder, snapshot, *decision);
  v1::ResolveWeightPathResponse per_call;
  server::FillPerCallPart(*decision, &per_call);
  per_call.set_decision_etag(decided.EtagFor(per_call));
  FUZZ_CHECK(per_call.decision_etag() == whole.decision_etag(),
             "cached part and Resolve give different etags");

  grpc::ByteBuffer wire;
  server::EncodeResolveResponse(decided.encoded, per_call, &wire);
  const std::string bytes = Flatten(wire);
  FUZZ_CHECK(bytes == DeterministicBytes(whole),
             "the response on the wire is not protobuf's serialization of the response");

  grpc::ByteBuffer unchanged;
  server::EncodeUnchangedResponse(decided.message.policy_version(), per_call.resolve_interval_seconds(),
                                  per_call.decision_etag(), &unchanged);
  v1::ResolveWeightPathResponse parsed;
  FUZZ_CHECK(parsed.ParseFromString(Flatten(unchanged)), "unchanged answer does not parse");
  v1::ResolveWeightPathResponse expected;
  expected.set_policy_version(decided.message.policy_version());
  expected.set_resolve_interval_seconds(per_call.resolve_interval_seconds());
  expected.set_decision_etag(per_call.decision_etag());
  expected.set_unchanged(true);
  const std::string unchanged_differences = Differences(expected, parsed);
  FUZZ_CHECK(unchanged_differences.empty(), unchanged_differences);
}

}  // namespace
}  // namespace weightpath::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  weightpath::fuzz::GetFixture();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace weightpath;
  const std::string wire(reinterpret_cast<const char*>(data), size);

  v1::ResolveWeightPathRequest reference;
  const bool protobuf_accepts = reference.ParseFromString(wire);

  // The decoder on its own, with its own kept runs.
  static auto* const decoder = new server::RequestDecoder;
  static auto* const decoded = new v1::ResolveWeightPathRequest;
  decoder->Reset(decoded);
  if (decoder->Decode(wire, decoded)) {
    FUZZ_CHECK(protobuf_accepts, "the decoder accepted bytes protobuf refuses");
    const std::string differences = fuzz::Differences(reference, *decoded);
    FUZZ_CHECK(differences.empty(), absl::StrCat("decoder and protobuf differ: ", differences));
  }

  // The head, as the handler reads it before anything else.
  server::RequestHead head;
  if (server::DecodeRequestHead(wire, &head)) {
    v1::HardwareProfile profile;
    const bool profile_parses =
        profile.ParseFromArray(head.profile.data(), static_cast<int>(head.profile.size()));
    FUZZ_CHECK(protobuf_accepts == profile_parses, "the head hid a parse failure");
    if (protobuf_accepts) {
      FUZZ_CHECK(reference.device_id() == head.device_id, "head device_id differs");
      FUZZ_CHECK(reference.model() == head.model, "head model differs");
      FUZZ_CHECK(reference.agent_version() == head.agent_version, "head agent_version differs");
      FUZZ_CHECK(reference.known_decision_etag() == head.known_decision_etag,
                 "head known_decision_etag differs");
      FUZZ_CHECK(reference.priority() == head.priority, "head priority differs");
      FUZZ_CHECK(reference.dry_run() == head.dry_run, "head dry_run differs");
    }
  }

  // The server's path, on this thread's scratch as a handler would use it.
  server::ResolveScratch& scratch = server::ThreadResolveScratch();
  grpc::Slice slice(wire);
  grpc::ByteBuffer bytes(&slice, 1);
  const absl::Status parsed = server::ParseResolveRequest(&bytes, &scratch);
  FUZZ_CHECK(parsed.ok() == protobuf_accepts,
             absl::StrCat("ParseResolveRequest says ", parsed.ToString(), ", protobuf says ",
                          protobuf_accepts ? "valid" : "invalid"));
  if (!parsed.ok()) {
    FUZZ_CHECK(fuzz::IsCleanRefusal(parsed), parsed.ToString());
    return 0;
  }
  const std::string differences = fuzz::Differences(reference, scratch.request);
  FUZZ_CHECK(differences.empty(),
             absl::StrCat("ParseResolveRequest and protobuf differ: ", differences));
  FUZZ_CHECK(scratch.request.has_profile() == reference.has_profile(), "profile presence differs");

  const absl::Status valid = server::ValidateResolveRequest(scratch.request);
  if (!valid.ok()) {
    FUZZ_CHECK(fuzz::IsCleanRefusal(valid), valid.ToString());
    return 0;
  }
  fuzz::CheckResponse(scratch.request);
  return 0;
}
