// bench_trust_verify: what TUF metadata verification costs a device when the
// targets list 1,000 artifacts (and 10 and 10,000 for the trend): the
// targets file alone (size check, SHA-256 against the snapshot, parse,
// canonical form, ed25519 signature, version and expiry), a whole refresh
// from a fresh root, the cached refresh a boot with unchanged metadata does,
// and one target lookup. Figures go to bench/RESULTS-trust.md.
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "benchmark/benchmark.h"
#include "trust/client.h"
#include "trust/crypto.h"
#include "trust/metadata.h"
#include "trust/repository.h"
#include "trust/trusted_metadata_set.h"

namespace weightpath::trust {
namespace {

const absl::Time kNow = absl::FromUnixSeconds(1'900'000'000);

// A repository whose targets list `count` artifacts, each with weightpath's
// custom fields, signed by one key per role as `weightpathctl repo` makes it.
struct BenchRepository {
  std::map<std::string, std::string> files;
  std::string root;
  std::string targets_name;
  std::string first_target;
  std::string last_target;
};

SigningKey Key(const char* name) {
  absl::StatusOr<Ed25519PrivateKey> key = Ed25519PrivateKey::Generate();
  if (!key.ok()) std::abort();
  return MakeSigningKey(name, *std::move(key));
}

template <typename T>
std::string Sign(const T& signed_part, const SigningKey& key) {
  absl::StatusOr<std::string> bytes = SignMetadata(SignedToJson(signed_part), {&key});
  if (!bytes.ok()) std::abort();
  return *bytes;
}

const BenchRepository& Repository(int count) {
  static std::map<int, BenchRepository>* cache = new std::map<int, BenchRepository>();
  auto found = cache->find(count);
  if (found != cache->end()) return found->second;
  SigningKey root_key = Key("root");
  SigningKey targets_key = Key("targets");
  SigningKey snapshot_key = Key("snapshot");
  SigningKey timestamp_key = Key("timestamp");
  Root root;
  root.expires = kNow + absl::Hours(24 * 365);
  for (const auto& [role, key] : std::vector<std::pair<std::string, const SigningKey*>>{
           {"root", &root_key}, {"targets", &targets_key}, {"snapshot", &snapshot_key},
           {"timestamp", &timestamp_key}}) {
    root.keys.emplace(key->key.keyid, key->key);
    root.roles[role] = RoleKeys{{key->key.keyid}, 1, {}};
  }
  BenchRepository repository;
  repository.root = Sign(root, root_key);
  repository.files["1.root.json"] = repository.root;

  Targets targets;
  targets.version = 7;
  targets.expires = kNow + absl::Hours(24 * 90);
  const char* classes[] = {"x86_cpu", "arm64_cpu", "cuda_discrete", "jetson", "npu_phone"};
  for (int i = 0; i < count; ++i) {
    const std::string path = absl::StrCat("models/spark-x2.5-1.7b/", 2026000 + i, "/w4a8-amx.bin");
    TargetFile file;
    file.length = 1'100'000'000 + i;
    file.hashes["sha256"] = Sha256Hex(path);
    file.custom = WeightpathTargetToJson(
        {"spark-x2.5-1.7b", "w4a8-amx", absl::StrCat("2026.", i), {classes[i % 5]}});
    targets.targets.emplace(path, file);
    if (i == 0) repository.first_target = path;
    repository.last_target = path;
  }
  const std::string targets_bytes = Sign(targets, targets_key);
  repository.targets_name = "7.targets.json";
  repository.files[repository.targets_name] = targets_bytes;

  Snapshot snapshot;
  snapshot.version = 9;
  snapshot.expires = kNow + absl::Hours(24 * 7);
  snapshot.meta["targets.json"] = DescribeMetadataFile(targets_bytes, targets.version);
  const std::string snapshot_bytes = Sign(snapshot, snapshot_key);
  repository.files["9.snapshot.json"] = snapshot_bytes;
  absl::StatusOr<std::string> timestamp =
      MakeTimestamp(snapshot_bytes, snapshot.version, 41, kNow + absl::Hours(24), {&timestamp_key});
  if (!timestamp.ok()) std::abort();
  repository.files["timestamp.json"] = *timestamp;
  return cache->emplace(count, std::move(repository)).first->second;
}

MetadataFetcher Fetcher(const BenchRepository& repository) {
  return [&repository](const MetadataRequest& request) -> absl::StatusOr<std::string> {
    auto it = repository.files.find(request.file_name);
    if (it == repository.files.end()) return absl::NotFoundError("404");
    return it->second;
  };
}

TrustedMetadataSet RefreshedSet(const BenchRepository& repository) {
  absl::StatusOr<TrustedMetadataSet> set = TrustedMetadataSet::Create(repository.root, kNow);
  if (!set.ok() || !RefreshMetadata(*set, Fetcher(repository)).ok()) std::abort();
  return *std::move(set);
}

// The targets file alone, against an already trusted snapshot: what it
// costs to accept a new targets version.
void BM_VerifyTargets(benchmark::State& state) {
  const BenchRepository& repository = Repository(static_cast<int>(state.range(0)));
  TrustedMetadataSet set = RefreshedSet(repository);
  const std::string& bytes = repository.files.at(repository.targets_name);
  for (auto _ : state) {
    absl::Status status = set.UpdateTargets(bytes);
    if (!status.ok()) state.SkipWithError(std::string(status.message()).c_str());
    benchmark::DoNotOptimize(status);
  }
  state.counters["targets_bytes"] = static_cast<double>(bytes.size());
}
BENCHMARK(BM_VerifyTargets)->Arg(10)->Arg(1000)->Arg(10000)->Unit(benchmark::kMicrosecond);

// The pieces of BM_VerifyTargets: parse (with its canonical form) ...
void BM_ParseTargets(benchmark::State& state) {
  const BenchRepository& repository = Repository(static_cast<int>(state.range(0)));
  const std::string& bytes = repository.files.at(repository.targets_name);
  for (auto _ : state) {
    absl::StatusOr<Metadata<Targets>> parsed = ParseTargets(bytes, "targets.json");
    if (!parsed.ok()) state.SkipWithError(std::string(parsed.status().message()).c_str());
    benchmark::DoNotOptimize(parsed);
  }
}
BENCHMARK(BM_ParseTargets)->Arg(1000)->Unit(benchmark::kMicrosecond);

// ... the SHA-256 of the file that the snapshot pins ...
void BM_Sha256TargetsFile(benchmark::State& state) {
  const BenchRepository& repository = Repository(static_cast<int>(state.range(0)));
  const std::string& bytes = repository.files.at(repository.targets_name);
  for (auto _ : state) benchmark::DoNotOptimize(Sha256Hex(bytes));
}
BENCHMARK(BM_Sha256TargetsFile)->Arg(1000)->Unit(benchmark::kMicrosecond);

// ... and the one ed25519 verification over the canonical bytes.
void BM_Ed25519VerifyTargets(benchmark::State& state) {
  const BenchRepository& repository = Repository(static_cast<int>(state.range(0)));
  absl::StatusOr<Metadata<Targets>> parsed =
      ParseTargets(repository.files.at(repository.targets_name), "targets.json");
  TrustedMetadataSet set = RefreshedSet(repository);
  const Root& root = set.root().signed_part;
  const RoleKeys& role = root.roles.at("targets");
  for (auto _ : state) {
    SignatureTally tally = TallySignatures(parsed->canonical_signed, parsed->signatures, root.keys,
                                           role.keyids, role.threshold);
    if (tally.valid != 1) state.SkipWithError("signature does not verify");
    benchmark::DoNotOptimize(tally);
  }
  state.counters["canonical_bytes"] = static_cast<double>(parsed->canonical_signed.size());
}
BENCHMARK(BM_Ed25519VerifyTargets)->Arg(1000)->Unit(benchmark::kMicrosecond);

// A device's first update: initial root, probe for root 2, timestamp,
// snapshot, targets, every check.
void BM_FullRefresh(benchmark::State& state) {
  const BenchRepository& repository = Repository(static_cast<int>(state.range(0)));
  const MetadataFetcher fetch = Fetcher(repository);
  for (auto _ : state) {
    absl::StatusOr<TrustedMetadataSet> set = TrustedMetadataSet::Create(repository.root, kNow);
    absl::Status status = set.ok() ? RefreshMetadata(*set, fetch).status() : set.status();
    if (!status.ok()) state.SkipWithError(std::string(status.message()).c_str());
    benchmark::DoNotOptimize(set);
  }
}
BENCHMARK(BM_FullRefresh)->Arg(10)->Arg(1000)->Arg(10000)->Unit(benchmark::kMicrosecond);

// A boot with the metadata unchanged: the persisted state restored, the
// timestamp downloaded and found equal, the persisted snapshot and targets
// verified again (they are read from the device's disk, so they are
// checked like downloads), then the decision's target looked up.
void BM_CachedRefreshAndLookup(benchmark::State& state) {
  const BenchRepository& repository = Repository(static_cast<int>(state.range(0)));
  const std::string persisted = RefreshedSet(repository).SerializeTrusted();
  const MetadataFetcher fetch = Fetcher(repository);
  for (auto _ : state) {
    absl::StatusOr<TrustedMetadataSet> set = TrustedMetadataSet::Restore(persisted, kNow);
    absl::Status status = set.ok() ? RefreshMetadata(*set, fetch).status() : set.status();
    if (status.ok()) status = FindTarget(*set, repository.last_target).status();
    if (!status.ok()) state.SkipWithError(std::string(status.message()).c_str());
    benchmark::DoNotOptimize(set);
  }
  state.counters["state_bytes"] = static_cast<double>(persisted.size());
}
BENCHMARK(BM_CachedRefreshAndLookup)->Arg(10)->Arg(1000)->Arg(10000)->Unit(benchmark::kMicrosecond);

void BM_FindTarget(benchmark::State& state) {
  const BenchRepository& repository = Repository(static_cast<int>(state.range(0)));
  TrustedMetadataSet set = RefreshedSet(repository);
  for (auto _ : state) {
    absl::StatusOr<TargetInfo> target = FindTarget(set, repository.last_target);
    if (!target.ok()) state.SkipWithError("not found");
    benchmark::DoNotOptimize(target);
  }
}
BENCHMARK(BM_FindTarget)->Arg(1000)->Unit(benchmark::kNanosecond);

}  // namespace
}  // namespace weightpath::trust

BENCHMARK_MAIN();
