// Writes the fuzzers' seeds that cannot be copied from the tree as they are,
// made fresh from the test data on every run so they always have the
// current formats:
//   resolve_request/  binary ResolveWeightPathRequests, two per example
//                     profile (one a dry run), with labels, priorities and
//                     a known etag;
//   decision_record/  the decision file the agent writes for those devices;
//   tuf_metadata/     a signed repository (root, targets with delegations
//                     and artifacts, snapshot, timestamp) and a trust state;
//   probe_tree/       each captured tree of tests/data/hardware as one
//                     archive (probe_tree_fuzzer.cc describes the format).
//
// Usage: fuzz_seed_writer SOURCE_DIR OUT_DIR
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "agent/decision/decision_record.h"
#include "policy/profile_json.h"
#include "server/config_watcher.h"
#include "server/resolve/resolver.h"
#include "trust/crypto.h"
#include "trust/json.h"
#include "trust/metadata.h"
#include "trust/repository.h"
#include "trust/trusted_metadata_set.h"

namespace fs = std::filesystem;
namespace weightpath::fuzz {
namespace {

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void WriteFile(const fs::path& path, const std::string& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
  if (!out) {
    std::cerr << "fuzz_seed_writer: cannot write " << path << "\n";
    std::exit(1);
  }
}

template <typename T>
T OrDie(absl::StatusOr<T> value, const std::string& what) {
  if (!value.ok()) {
    std::cerr << "fuzz_seed_writer: " << what << ": " << value.status() << "\n";
    std::exit(1);
  }
  return *std::move(value);
}

void WriteRequestsAndDecisions(const fs::path& source, const fs::path& out) {
  const auto snapshot = OrDie(server::LoadSnapshot(server::ConfigSources{}), "embedded snapshot");
  int n = 0;
  for (const auto& entry : fs::directory_iterator(source / "examples" / "profiles")) {
    if (entry.path().extension() != ".json") continue;
    const std::string name = entry.path().stem().string();
    v1::ResolveWeightPathRequest request;
    request.set_device_id(absl::StrCat("edge-", name));
    *request.mutable_profile() =
        OrDie(policy::ParseProfileJson(ReadFile(entry.path()), entry.path().string()), name);
    request.set_agent_version("0.1.0");
    if (n % 2 == 0) {
      request.set_priority(v1::PRIORITY_FIDELITY);
      (*request.mutable_labels())["workload"] = "agentic";
    } else {
      (*request.mutable_labels())["ring"] = "canary";
    }
    v1::ResolveWeightPathResponse response;
    server::ResolveSummary summary;
    if (!server::Resolve(request, *snapshot, &response, &summary).ok()) continue;
    if (n % 3 == 0) request.set_known_decision_etag(response.decision_etag());
    WriteFile(out / "resolve_request" / name, request.SerializeAsString());
    // The same request as an operator's dry run: field 8 on the wire.
    request.set_dry_run(true);
    WriteFile(out / "resolve_request" / absl::StrCat(name, "-dry-run"), request.SerializeAsString());
    request.set_dry_run(false);

    agent::DecisionRecord record;
    record.response = response;
    record.artifact_path = absl::StrCat("/var/cache/weightpath/", response.artifact().sha256());
    record.source = n % 2 == 0 ? agent::DecisionSource::kServer : agent::DecisionSource::kLastGood;
    WriteFile(out / "decision_record" / absl::StrCat(name, ".json"),
              OrDie(agent::DecisionToJson(record), name));
    ++n;
  }
}

void WriteTufRepository(const fs::path& out) {
  using namespace trust;
  const absl::Time now = absl::FromUnixSeconds(1750000000);
  NewRepositoryKeys keys;
  for (const char* role : {"root", "targets", "snapshot", "timestamp"}) {
    SigningKey key = MakeSigningKey(role, OrDie(Ed25519PrivateKey::Generate(), "key"));
    std::vector<Key>& list = std::string(role) == "root"      ? keys.root
                             : std::string(role) == "targets" ? keys.targets
                             : std::string(role) == "snapshot" ? keys.snapshot
                                                               : keys.timestamp;
    list.push_back(key.key);
    keys.signers.push_back(std::move(key));
  }
  NewRepositoryOptions options;
  options.now = now;
  const RepositoryFiles files = OrDie(CreateRepository(keys, options), "repository");
  WriteFile(out / "tuf_metadata" / "1.root.json", files.root);
  WriteFile(out / "tuf_metadata" / "snapshot.json", files.snapshot);
  WriteFile(out / "tuf_metadata" / "timestamp.json", files.timestamp);
  WriteFile(out / "tuf_metadata" / "targets-empty.json", files.targets);

  // Targets with artifacts and both kinds of delegation.
  Metadata<Targets> targets = OrDie(ParseTargets(files.targets, "targets.json"), "targets");
  Targets& part = targets.signed_part;
  part.version = 2;
  TargetFile artifact;
  artifact.length = 1234;
  artifact.hashes["sha256"] = std::string(64, 'a');
  artifact.custom = Json::MakeObject({{"weightpath", Json::MakeObject({{"path", Json::String("w4a8-amx")}})}});
  part.targets["models/spark/w4a8-amx.safetensors"] = artifact;
  part.targets["models/spark/bf16.safetensors"] = artifact;
  Delegations delegations;
  delegations.keys.emplace(keys.targets[0].keyid, keys.targets[0]);
  DelegatedRole by_path;
  by_path.name = "ml/team";
  by_path.keyids = {keys.targets[0].keyid};
  by_path.paths = std::vector<std::string>{"models/*/w4*.safetensors", "models/[a-s]?ark/*"};
  DelegatedRole by_hash;
  by_hash.name = "bins";
  by_hash.keyids = {keys.targets[0].keyid};
  by_hash.terminating = true;
  by_hash.path_hash_prefixes = std::vector<std::string>{"0", "8f", "c1a"};
  delegations.roles = {by_path, by_hash};
  part.delegations = delegations;
  std::vector<const SigningKey*> signer = {&keys.signers[1]};
  WriteFile(out / "tuf_metadata" / "2.targets.json",
            OrDie(SignMetadata(SignedToJson(part), signer), "targets"));

  TrustedMetadataSet set = OrDie(TrustedMetadataSet::Create(files.root, now), "trusted set");
  WriteFile(out / "tuf_metadata" / "trust-state.json", set.SerializeTrusted());
}

// "== /path" + text, or "== /path -> target" for a link (probe_tree_fuzzer.cc).
void WriteProbeTrees(const fs::path& source, const fs::path& out) {
  for (const auto& device : fs::directory_iterator(source / "tests" / "data" / "hardware")) {
    if (!device.is_directory()) continue;
    std::vector<fs::path> entries;
    for (auto it = fs::recursive_directory_iterator(device.path()); it != fs::end(it); ++it) {
      if (it->is_symlink() || it->is_regular_file()) entries.push_back(it->path());
    }
    std::sort(entries.begin(), entries.end());
    std::string archive;
    for (const fs::path& path : entries) {
      const std::string inside = "/" + fs::relative(path, device.path()).generic_string();
      if (path.extension() == ".md") continue;  // the tree's own notes
      if (fs::is_symlink(path)) {
        absl::StrAppend(&archive, "== ", inside, " -> ", fs::read_symlink(path).generic_string(), "\n");
      } else {
        absl::StrAppend(&archive, "== ", inside, "\n", ReadFile(path), "\n");
      }
    }
    WriteFile(out / "probe_tree" / device.path().filename(), archive);
  }
}

}  // namespace
}  // namespace weightpath::fuzz

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: fuzz_seed_writer SOURCE_DIR OUT_DIR\n";
    return 2;
  }
  const fs::path source = argv[1];
  const fs::path out = argv[2];
  weightpath::fuzz::WriteRequestsAndDecisions(source, out);
  weightpath::fuzz::WriteTufRepository(out);
  weightpath::fuzz::WriteProbeTrees(source, out);
  return 0;
}
