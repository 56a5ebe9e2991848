// The server's per-call work for ResolveWeightPath outside gRPC, piece by
// piece, on the largest example profile (224 logical CPUs, 170 flags): how
// the request is parsed, what validation and the decision cost, and how the
// response is produced, and what building the registry record costs (with
// the registry on). The *_Protobuf cases are the straightforward way a
// typed handler does it, kept as the reference the hot path is measured
// against. Figures go to bench/RESULTS-server.md.
#include <string>

#include "benchmark/benchmark.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "bench/bench_request.h"
#include "server/config_watcher.h"
#include "server/device_record.h"
#include "server/request_validation.h"
#include "server/resolve_wire.h"
#include "server/resolver.h"
#include "server/response_cache.h"

namespace weightpath::server {
namespace {

v1::ResolveWeightPathRequest ExampleRequest() {
  return *bench::BenchResolveRequest(WEIGHTPATH_EXAMPLE_PROFILES_DIR "/intel-sapphire-rapids.json");
}

const std::string& RequestWire() {
  static const std::string wire = ExampleRequest().SerializeAsString();
  return wire;
}

grpc::ByteBuffer AsByteBuffer(const std::string& wire) {
  const grpc::Slice slice(wire);
  return grpc::ByteBuffer(&slice, 1);
}

const SnapshotHolder& Snapshots() {
  static const SnapshotHolder* holder = new SnapshotHolder(*LoadSnapshot({}));
  return *holder;
}

void BM_ParseRequest_Protobuf(benchmark::State& state) {
  const std::string& wire = RequestWire();
  for (auto _ : state) {
    v1::ResolveWeightPathRequest request;
    benchmark::DoNotOptimize(request.ParseFromString(wire));
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * wire.size()));
}
BENCHMARK(BM_ParseRequest_Protobuf);

// The control for the decoder: protobuf's parser into one reused message,
// from the received slice (WEIGHTPATH_REQUEST_DECODER=protobuf in the server).
void BM_ParseRequest_ProtobufReused(benchmark::State& state) {
  const std::string& wire = RequestWire();
  v1::ResolveWeightPathRequest request;
  for (auto _ : state) {
    grpc::ByteBuffer bytes = AsByteBuffer(wire);
    grpc::Slice slice;
    (void)bytes.TrySingleSlice(&slice);
    benchmark::DoNotOptimize(
        request.ParseFromArray(slice.begin(), static_cast<int>(slice.size())));
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * wire.size()));
}
BENCHMARK(BM_ParseRequest_ProtobufReused);

void BM_ParseRequest_HotPath(benchmark::State& state) {
  const std::string& wire = RequestWire();
  ResolveScratch scratch;
  for (auto _ : state) {
    grpc::ByteBuffer bytes = AsByteBuffer(wire);
    benchmark::DoNotOptimize(ParseResolveRequest(&bytes, &scratch).ok());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * wire.size()));
}
BENCHMARK(BM_ParseRequest_HotPath);

void BM_Validate(benchmark::State& state) {
  const v1::ResolveWeightPathRequest request = ExampleRequest();
  for (auto _ : state) benchmark::DoNotOptimize(ValidateResolveRequest(request).ok());
}
BENCHMARK(BM_Validate);

void BM_Decide(benchmark::State& state) {
  const v1::ResolveWeightPathRequest request = ExampleRequest();
  const Snapshot& snapshot = Snapshots().Current();
  for (auto _ : state) {
    ResolveSummary summary;
    benchmark::DoNotOptimize(Decide(request, snapshot, &summary).ok());
  }
}
BENCHMARK(BM_Decide);

void BM_Respond_Protobuf(benchmark::State& state) {
  const v1::ResolveWeightPathRequest request = ExampleRequest();
  const Snapshot& snapshot = Snapshots().Current();
  for (auto _ : state) {
    v1::ResolveWeightPathResponse response;
    ResolveSummary summary;
    (void)Resolve(request, snapshot, &response, &summary);
    benchmark::DoNotOptimize(response.SerializeAsString());
  }
}
BENCHMARK(BM_Respond_Protobuf);

void BM_Respond_HotPath(benchmark::State& state) {
  const v1::ResolveWeightPathRequest request = ExampleRequest();
  const Snapshot& snapshot = Snapshots().Current();
  v1::ResolveWeightPathResponse per_call;
  for (auto _ : state) {
    ResolveSummary summary;
    const absl::StatusOr<ResolvedDecision> decision = Decide(request, snapshot, &summary);
    const DecidedPart& decided = ThreadDecidedPartCache().Find(Snapshots(), snapshot, *decision);
    per_call.Clear();
    FillPerCallPart(*decision, &per_call);
    grpc::ByteBuffer out;
    EncodeResolveResponse(decided.encoded, per_call, &out);
    benchmark::DoNotOptimize(out.Length());
  }
}
BENCHMARK(BM_Respond_HotPath);

// A device re-resolving the decision it holds: decided, then answered with
// the few bytes of "unchanged".
void BM_Respond_Unchanged(benchmark::State& state) {
  v1::ResolveWeightPathRequest request = ExampleRequest();
  const Snapshot& snapshot = Snapshots().Current();
  request.set_known_decision_etag(bench::EmbeddedDefaultsDecision(request)->decision_etag());
  v1::ResolveWeightPathResponse per_call;
  for (auto _ : state) {
    ResolveSummary summary;
    const absl::StatusOr<ResolvedDecision> decision = Decide(request, snapshot, &summary);
    const DecidedPart& decided = ThreadDecidedPartCache().Find(Snapshots(), snapshot, *decision);
    per_call.Clear();
    FillPerCallPart(*decision, &per_call);
    per_call.set_decision_etag(decided.EtagFor(per_call));
    if (request.known_decision_etag() != per_call.decision_etag()) state.SkipWithError("etag");
    grpc::ByteBuffer out;
    EncodeUnchangedResponse(decided.message.policy_version(), per_call.resolve_interval_seconds(),
                            per_call.decision_etag(), &out);
    benchmark::DoNotOptimize(out.Length());
  }
}
BENCHMARK(BM_Respond_Unchanged);

struct ResolvedExample {
  v1::ResolveWeightPathRequest request = ExampleRequest();
  v1::ResolveWeightPathResponse decided;
  v1::ResolveWeightPathResponse per_call;
  ResolvedExample() {
    ResolveSummary summary;
    const absl::StatusOr<ResolvedDecision> decision = Decide(request, Snapshots().Current(), &summary);
    FillDecidedPart(*decision, Snapshots().Current(), &decided);
    FillPerCallPart(*decision, &per_call);
  }
};

void BM_RegistryRecord_Protobuf(benchmark::State& state) {
  const ResolvedExample example;
  v1::Device device;
  for (auto _ : state) {
    FillDeviceRecord(example.request, example.decided, example.per_call, absl::Now(), device);
    benchmark::DoNotOptimize(store::EncodeDevice(device).fingerprint);
  }
}
BENCHMARK(BM_RegistryRecord_Protobuf);

void BM_RegistryRecord_HotPath(benchmark::State& state) {
  const ResolvedExample example;
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        EncodeDeviceRecord(example.request, example.decided, example.per_call, absl::Now()).fingerprint);
  }
}
BENCHMARK(BM_RegistryRecord_HotPath);

}  // namespace
}  // namespace weightpath::server

BENCHMARK_MAIN();
