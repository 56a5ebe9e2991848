// The hot path's response: the decided part encoded once and cached, plus
// the per-call part, must read back as exactly the response Resolve builds,
// and the cache must never answer from a snapshot other than the call's.
#include "server/wire/response_cache.h"

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "google/protobuf/util/message_differencer.h"
#include "grpcpp/support/byte_buffer.h"
#include "gtest/gtest.h"
#include "server/config_watcher.h"
#include "server/wire/resolve_wire.h"
#include "server/resolve/resolver.h"
#include "tests/server/example_requests.h"

namespace weightpath::server {
namespace {

using ::google::protobuf::util::MessageDifferencer;

// Every example profile at every priority.
std::vector<v1::ResolveWeightPathRequest> ExampleRequests() {
  std::vector<v1::ResolveWeightPathRequest> requests;
  for (const v1::ResolveWeightPathRequest& base : testing::ExampleProfileRequests()) {
    for (v1::Priority priority : {v1::PRIORITY_UNSPECIFIED, v1::PRIORITY_SPEED, v1::PRIORITY_FIDELITY}) {
      requests.push_back(base);
      requests.back().set_priority(priority);
    }
  }
  return requests;
}

std::shared_ptr<const Snapshot> EmbeddedSnapshot() {
  auto snapshot = LoadSnapshot({});
  EXPECT_TRUE(snapshot.ok()) << snapshot.status();
  return *snapshot;
}

v1::ResolveWeightPathResponse HotPathResponse(const SnapshotHolder& holder, DecidedPartCache& cache,
                                              const v1::ResolveWeightPathRequest& request) {
  const auto pinned_snapshot = holder.Current();
  const Snapshot& snapshot = *pinned_snapshot;
  ResolveSummary summary;
  absl::StatusOr<ResolvedDecision> decision = Decide(request, snapshot, &summary);
  EXPECT_TRUE(decision.ok()) << decision.status();
  const DecidedPart& decided = cache.Find(holder, snapshot, *decision);
  v1::ResolveWeightPathResponse per_call;
  FillPerCallPart(*decision, &per_call);
  per_call.set_decision_etag(decided.EtagFor(per_call));
  grpc::ByteBuffer bytes;
  EncodeResolveResponse(decided.encoded, per_call, &bytes);
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(bytes.Dump(&slices).ok());
  std::string wire;
  for (const grpc::Slice& slice : slices) {
    wire.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  v1::ResolveWeightPathResponse response;
  EXPECT_TRUE(response.ParseFromString(wire));
  return response;
}

TEST(ResponseCacheTest, EncodedResponsesReadBackAsResolveBuildsThem) {
  SnapshotHolder holder(EmbeddedSnapshot());
  DecidedPartCache cache;
  for (int round = 0; round < 2; ++round) {  // the second round answers from the cache
    for (const v1::ResolveWeightPathRequest& request : ExampleRequests()) {
      v1::ResolveWeightPathResponse expected;
      ResolveSummary summary;
      ASSERT_TRUE(Resolve(request, *holder.Current(), &expected, &summary).ok());
      const v1::ResolveWeightPathResponse actual = HotPathResponse(holder, cache, request);
      std::string differences;
      MessageDifferencer differencer;
      differencer.ReportDifferencesToString(&differences);
      EXPECT_TRUE(differencer.Compare(expected, actual))
          << request.device_id() << " priority " << request.priority() << ": " << differences;
      EXPECT_FALSE(actual.weight_path().verification().reason().empty());
    }
  }
  // One entry per distinct decision, however many calls reached it.
  EXPECT_GT(cache.size(), 1u);
  EXPECT_LE(cache.size(), ExampleRequests().size());
}

TEST(ResponseCacheTest, SameDecisionSharesOneEncoding) {
  SnapshotHolder holder(EmbeddedSnapshot());
  DecidedPartCache cache;
  const v1::ResolveWeightPathRequest request = ExampleRequests().front();
  const auto pinned_snapshot = holder.Current();
  const Snapshot& snapshot = *pinned_snapshot;
  ResolveSummary summary;
  const absl::StatusOr<ResolvedDecision> decision = Decide(request, snapshot, &summary);
  ASSERT_TRUE(decision.ok());
  const DecidedPart* first = &cache.Find(holder, snapshot, *decision);
  const DecidedPart* second = &cache.Find(holder, snapshot, *decision);
  EXPECT_EQ(first, second);
  EXPECT_EQ(first->decision_etag.size(), 32u);
  EXPECT_EQ(first->decision_etag, first->EtagFor(v1::ResolveWeightPathResponse()));
}

// The embedded policy with one more comment line: the same rules under
// another version.
std::shared_ptr<const Snapshot> ChangedSnapshot() {
  std::ifstream in(WEIGHTPATH_SOURCE_DIR "/policy/default_policy.yaml");
  std::stringstream text;
  text << in.rdbuf() << "\n# changed for the cache test\n";
  const std::string path = ::testing::TempDir() + "/response_cache_test_policy.yaml";
  std::ofstream(path) << text.str();
  ConfigSources sources;
  sources.policy_path = path;
  auto snapshot = LoadSnapshot(sources);
  EXPECT_TRUE(snapshot.ok()) << snapshot.status();
  return *snapshot;
}

TEST(ResponseCacheTest, EntriesNeverOutliveOrMixSnapshots) {
  SnapshotHolder holder(EmbeddedSnapshot());
  DecidedPartCache cache;
  const std::vector<v1::ResolveWeightPathRequest> requests = ExampleRequests();
  const v1::ResolveWeightPathRequest& request = requests.front();
  std::shared_ptr<const Snapshot> old_snapshot = holder.Share();
  ResolveSummary summary;
  const absl::StatusOr<ResolvedDecision> old_decision = Decide(request, *old_snapshot, &summary);
  ASSERT_TRUE(old_decision.ok());
  for (const auto& each : requests) HotPathResponse(holder, cache, each);
  ASSERT_GT(cache.size(), 1u);

  std::shared_ptr<const Snapshot> changed = ChangedSnapshot();
  ASSERT_NE(changed->policy->version(), old_snapshot->policy->version());
  holder.Publish(changed);
  const v1::ResolveWeightPathResponse fresh = HotPathResponse(holder, cache, request);
  EXPECT_EQ(fresh.policy_version(), changed->policy->version());
  EXPECT_EQ(cache.size(), 1u);  // the old snapshot's entries are gone

  // A call that decided against the old snapshot just before the swap is
  // answered from that snapshot, and its answer is not kept.
  const DecidedPart& stale = cache.Find(holder, *old_snapshot, *old_decision);
  EXPECT_EQ(stale.message.policy_version(), old_snapshot->policy->version());
  EXPECT_EQ(HotPathResponse(holder, cache, request).policy_version(), changed->policy->version());
}

}  // namespace
}  // namespace weightpath::server
