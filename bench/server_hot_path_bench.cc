// The server's per-call work for ResolveWeightPath outside gRPC, piece by
// piece, on the largest example profile (224 logical CPUs, 170 flags): how
// the request is parsed, what validation and the decision cost, and how the
// response is produced, and what building the registry record costs (with
// the registry on). The *_Protobuf cases are the straightforward way a
// typed handler does it, kept as the reference the hot path is measured
// against. Figures go to bench/RESULTS-server.md.
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "bench/bench_request.h"
#include "absl/strings/str_format.h"
#include "server/config_watcher.h"
#include "server/security/device_call_limits.h"
#include "server/fleet/device_record.h"
#include "server/resolve/request_validation.h"
#include "server/wire/resolve_wire.h"
#include "server/resolve/resolver.h"
#include "server/wire/response_cache.h"
#include "store/write_behind.h"

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
  const auto pinned_snapshot = Snapshots().Current();
  const Snapshot& snapshot = *pinned_snapshot;
  for (auto _ : state) {
    ResolveSummary summary;
    benchmark::DoNotOptimize(Decide(request, snapshot, &summary).ok());
  }
}
BENCHMARK(BM_Decide);

void BM_Respond_Protobuf(benchmark::State& state) {
  const v1::ResolveWeightPathRequest request = ExampleRequest();
  const auto pinned_snapshot = Snapshots().Current();
  const Snapshot& snapshot = *pinned_snapshot;
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
  const auto pinned_snapshot = Snapshots().Current();
  const Snapshot& snapshot = *pinned_snapshot;
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

// The same for examples/policies/gpu-fleet.yaml on the captured H200 with
// the catalog's model facts: its fp8 path derives five engine arguments
// from the profile, so the decided part is built and encoded per call
// (server/wire/response_cache.h) instead of found.
const SnapshotHolder& GpuFleetSnapshots() {
  static const SnapshotHolder* holder = [] {
    std::string catalog = "default_model: Llama-3.1-8B\nmodels:\n";
    for (const char* model : {"Llama-3.1-8B", "Llama-3.1-70B", "Synthetic-12-heads"}) {
      absl::StrAppend(&catalog, "  ", model, ":\n");
      for (const char* build : {"fp8-w8a8", "w4a16-marlin", "bf16", "fp16", "export-qnn-w8a16",
                                "w4a16-tinygemm", "w4a8-amx"}) {
        absl::StrAppend(&catalog, "    ", build, ": {uri: https://mirror.example/", model, "/",
                        build, ".bin, sha256: ", std::string(64, 'a'), ", size_bytes: 1}\n");
      }
    }
    std::ifstream facts(WEIGHTPATH_SOURCE_DIR "/tests/data/gpu-profiles/models.yaml");
    std::stringstream text;
    text << facts.rdbuf();
    const std::string path = absl::StrCat(std::getenv("TMPDIR") != nullptr ? std::getenv("TMPDIR")
                                                                           : "/tmp",
                                          "/bench-gpu-fleet-catalog.yaml");
    std::ofstream(path) << catalog << text.str();
    return new SnapshotHolder(*LoadSnapshot(
        {WEIGHTPATH_SOURCE_DIR "/examples/policies/gpu-fleet.yaml", path}));
  }();
  return *holder;
}

void BM_Respond_HotPath_GpuFleetH200(benchmark::State& state) {
  v1::ResolveWeightPathRequest request =
      *bench::BenchResolveRequest(WEIGHTPATH_SOURCE_DIR "/tests/data/gpu-profiles/h200.json");
  const auto pinned_snapshot = GpuFleetSnapshots().Current();
  const Snapshot& snapshot = *pinned_snapshot;
  v1::ResolveWeightPathResponse per_call;
  for (auto _ : state) {
    ResolveSummary summary;
    const absl::StatusOr<ResolvedDecision> decision = Decide(request, snapshot, &summary);
    const DecidedPart& decided =
        ThreadDecidedPartCache().Find(GpuFleetSnapshots(), snapshot, *decision);
    if (decided.message.engine_kwargs().fields().size() != 6) state.SkipWithError("kwargs");
    per_call.Clear();
    FillPerCallPart(*decision, &per_call);
    per_call.set_decision_etag(decided.EtagFor(per_call));
    grpc::ByteBuffer out;
    EncodeResolveResponse(decided.encoded, per_call, &out);
    benchmark::DoNotOptimize(out.Length());
  }
}
BENCHMARK(BM_Respond_HotPath_GpuFleetH200);

// A device re-resolving the decision it holds: decided, then answered with
// the few bytes of "unchanged".
void BM_Respond_Unchanged(benchmark::State& state) {
  v1::ResolveWeightPathRequest request = ExampleRequest();
  const auto pinned_snapshot = Snapshots().Current();
  const Snapshot& snapshot = *pinned_snapshot;
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
    const absl::StatusOr<ResolvedDecision> decision = Decide(request, *Snapshots().Current(), &summary);
    FillDecidedPart(*decision, *Snapshots().Current(), &decided);
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

// As the server builds it: the profile kept from the request's own wire
// bytes (the decoder's head), fingerprinted less its free RAM.
void BM_RegistryRecord_HotPath(benchmark::State& state) {
  const ResolvedExample example;
  const std::string profile_wire = example.request.profile().SerializeAsString();
  for (auto _ : state) {
    benchmark::DoNotOptimize(EncodeDeviceRecord(example.request, example.decided, example.per_call,
                                                absl::Now(), profile_wire)
                                 .fingerprint);
  }
}
BENCHMARK(BM_RegistryRecord_HotPath);

// The record as it was before profiles were kept, for an A/B in one run: a
// profile past store::kMaxStoredProfileBytes is left out (the size check
// alone), so the record is the body and its hash, as before.
void BM_RegistryRecord_HotPathWithoutTheProfile(benchmark::State& state) {
  ResolvedExample example;
  example.request.mutable_profile()->add_probe_notes(
      std::string(store::kMaxStoredProfileBytes, 'n'));
  const std::string profile_wire = example.request.profile().SerializeAsString();
  for (auto _ : state) {
    benchmark::DoNotOptimize(EncodeDeviceRecord(example.request, example.decided, example.per_call,
                                                absl::Now(), profile_wire)
                                 .fingerprint);
  }
}
BENCHMARK(BM_RegistryRecord_HotPathWithoutTheProfile);

// A request the wire decoder has no head for: the profile serialized.
void BM_RegistryRecord_HotPathSerializingTheProfile(benchmark::State& state) {
  const ResolvedExample example;
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        EncodeDeviceRecord(example.request, example.decided, example.per_call, absl::Now()).fingerprint);
  }
}
BENCHMARK(BM_RegistryRecord_HotPathSerializingTheProfile);

// The profile's share of the record: its fingerprint less free RAM.
void BM_RegistryRecord_ProfileFingerprint(benchmark::State& state) {
  const ResolvedExample example;
  const std::string profile_wire = example.request.profile().SerializeAsString();
  state.counters["profile_bytes"] = static_cast<double>(profile_wire.size());
  for (auto _ : state) benchmark::DoNotOptimize(store::ProfileFingerprint(profile_wire));
}
BENCHMARK(BM_RegistryRecord_ProfileFingerprint);

// The overload guards a resolve passes before its work (server/security/device_call_limits.h),
// as the server's flags set them up: off, the in-flight limit alone (the
// default), and with a per-device rate limit too, over 1 or 100,000 distinct
// device ids (one shard entry hot in cache, or misses across the 1 MiB
// table, one cache line per lookup). The rate is high enough that every call is admitted, the path a
// healthy fleet takes.
std::vector<std::string> DeviceIds(int count) {
  std::vector<std::string> ids;
  ids.reserve(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) ids.push_back(absl::StrFormat("edge-%08d", i));
  return ids;
}

void RunAdmissions(benchmark::State& state, const DeviceCallLimitOptions& options) {
  static DeviceCallLimits* limits = nullptr;
  if (state.thread_index() == 0) limits = new DeviceCallLimits(options);
  const std::vector<std::string> ids = DeviceIds(static_cast<int>(state.range(0)));
  int64_t now_ns = 1'000'000'000'000 + state.thread_index();
  size_t next = (static_cast<size_t>(state.thread_index()) * 7919) % ids.size();
  for (auto _ : state) {
    now_ns += 1000;
    absl::StatusOr<DeviceCallLimits::Admission> admission = limits->Admit(ids[next], now_ns);
    benchmark::DoNotOptimize(admission.ok());
    if (++next >= ids.size()) next = 0;
  }
  if (state.thread_index() == 0) {
    delete limits;
    limits = nullptr;
  }
}

void BM_DeviceCallLimits_Off(benchmark::State& state) { RunAdmissions(state, {}); }
BENCHMARK(BM_DeviceCallLimits_Off)->Arg(1);

void BM_DeviceCallLimits_Inflight(benchmark::State& state) {
  DeviceCallLimitOptions options;
  options.max_inflight = 1000;
  RunAdmissions(state, options);
}
BENCHMARK(BM_DeviceCallLimits_Inflight)->Arg(1)->Threads(1)->Threads(2);

void BM_DeviceCallLimits_RateAndInflight(benchmark::State& state) {
  DeviceCallLimitOptions options;
  options.rate_per_second = 1e6;
  options.burst = 1e6;
  options.max_inflight = 1000;
  RunAdmissions(state, options);
}
BENCHMARK(BM_DeviceCallLimits_RateAndInflight)->Arg(1)->Arg(100000)->Threads(1)->Threads(2);

// The registry record's enqueue, which also notes the device as recently
// queued (the report path's write-through looks there).
void BM_WriteBehind_TryEnqueue(benchmark::State& state) {
  constexpr size_t kBatch = 100000;
  store::WriteBehindOptions options;
  options.capacity = kBatch;
  options.max_batch = kBatch;
  options.start_flusher = false;
  store::DeviceWriteBehind queue([](const std::vector<store::EncodedDevice>&) { return absl::OkStatus(); },
                                 options);
  const ResolvedExample example;
  const store::EncodedDevice record =
      EncodeDeviceRecord(example.request, example.decided, example.per_call, absl::Now());
  const std::vector<std::string> ids = DeviceIds(static_cast<int>(kBatch));
  std::vector<store::EncodedDevice> records;
  size_t next = kBatch;
  for (auto _ : state) {
    if (next == kBatch) {
      state.PauseTiming();
      queue.FlushOnce();
      records.assign(kBatch, record);
      for (size_t i = 0; i < kBatch; ++i) records[i].device_id = ids[i];
      next = 0;
      state.ResumeTiming();
    }
    benchmark::DoNotOptimize(queue.TryEnqueue(std::move(records[next++])));
  }
}
BENCHMARK(BM_WriteBehind_TryEnqueue);

// The part of that the report path's write-through added: hashing the id and
// noting it in the recently-queued filter (a 1 MiB table, so mostly a miss).
void BM_RecentDeviceFilter_Remember(benchmark::State& state) {
  store::RecentDeviceFilter filter;
  const std::vector<std::string> ids = DeviceIds(100000);
  size_t next = 0;
  for (auto _ : state) {
    filter.Remember(store::StableHash64(ids[next]));
    if (++next == ids.size()) next = 0;
  }
}
BENCHMARK(BM_RecentDeviceFilter_Remember);

void BM_StableHash64_DeviceId(benchmark::State& state) {
  const std::string id = "edge-00012345";
  for (auto _ : state) benchmark::DoNotOptimize(store::StableHash64(id));
}
BENCHMARK(BM_StableHash64_DeviceId);

}  // namespace
}  // namespace weightpath::server

BENCHMARK_MAIN();
