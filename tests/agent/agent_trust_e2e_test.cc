// Signed artifacts as a device meets them: the real weightpath-agent with a
// `trust` block, the real weightpath-server handing out a plain catalog
// whose entries carry target_path, an HTTP mirror on loopback serving the
// artifacts and the repository's metadata, and repositories made and signed
// by the real `weightpathctl repo` in each test.
//
// An attacker here controls the server's answers (the catalog) and the
// mirror's files, and in some tests holds the online snapshot and timestamp
// keys; never the offline root and targets keys. Every attack must be
// refused with a reason that names it, and leave the last good build
// running.
#include <unistd.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "agent/decision/decision_record.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "policy/policy.h"
#include "tests/agent/artifact_files.h"
#include "tests/agent/canned_http_server.h"
#include "tests/agent/model_build.h"
#include "tests/agent/range_http_server.h"
#include "tests/agent/temp_dir.h"
#include "tests/server/server_process.h"
#include "tests/support/subprocess.h"
#include "tests/testing/status_matchers.h"
#include "trust/client.h"
#include "trust/crypto.h"
#include "trust/json.h"
#include "trust/metadata.h"
#include "trust/repository.h"

#ifndef WEIGHTPATH_AGENT_BINARY
#error "the test target defines WEIGHTPATH_AGENT_BINARY"
#endif
#ifndef WEIGHTPATHCTL_BINARY
#error "the test target defines WEIGHTPATHCTL_BINARY"
#endif

namespace weightpath::agent {
namespace {

using server::testing::ServerProcess;
using ::testing::AllOf;
using testing::ArtifactBytes;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::RangeHttpServer;
using testing::ReadTextFile;
using testing::TempDir;
using testing::WriteArtifact;
using testing::WriteTextFile;
using weightpath::testing::IsOk;
using ::weightpath::testing::ProcessResult;
using ::weightpath::testing::RunProcess;

namespace fs = std::filesystem;

constexpr char kModel[] = "Spark-X2.5-1.7B";
constexpr size_t kArtifactBytes = 64 * 1024;
// An x86 server CPU with AMX: the default policy gives it w4a8-amx for
// speed, and the device classifies itself as x86_cpu.
constexpr char kProfileJson[] = R"({
  "arch": "x86_64",
  "cpu_model": "Intel(R) Xeon(R) Platinum 8480C",
  "cpu_flags": ["avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_bf16", "amx_tile", "amx_int8", "fma", "f16c"],
  "n_logical": 8,
  "n_physical": 4,
  "numa_nodes": 1,
  "ram_total_bytes": 34359738368,
  "ram_available_bytes": 30000000000,
  "accelerator": "none",
  "supports_bf16": true,
  "host_os": "linux"
})";

// A mirror for the endless-data attack: serves DIR, except that the names
// given are answered with spaces for as long as the client reads (200, no
// Content-Length). It logs "NAME BYTES" once the client hangs up.
constexpr char kEndlessMirror[] = R"(import http.server, os, sys
root, endless = sys.argv[1], set(sys.argv[2].split(','))
class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    def log_message(self, *args):
        pass
    def do_GET(self):
        name = self.path.lstrip('/')
        if name in endless:
            self.close_connection = True
            self.send_response(200)
            self.send_header('Connection', 'close')
            self.end_headers()
            chunk, sent = b' ' * 65536, 0
            try:
                while True:
                    self.wfile.write(chunk)
                    sent += len(chunk)
            except OSError:
                pass
            with open(os.path.join(root, '..', 'endless.log'), 'a') as log:
                log.write('%s %d\n' % (name, sent))
            return
        path = os.path.join(root, name)
        if '..' in name or not os.path.isfile(path):
            self.send_error(404)
            return
        with open(path, 'rb') as f:
            data = f.read()
        self.send_response(200)
        self.send_header('Content-Length', str(len(data)))
        self.end_headers()
        self.wfile.write(data)
server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)
server.daemon_threads = True
print('PORT %d' % server.server_address[1], flush=True)
server.serve_forever()
)";

ProcessResult Ctl(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {WEIGHTPATHCTL_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  ProcessResult result = RunProcess(argv, {}, absl::Seconds(60));
  EXPECT_EQ(result.exit_code, 0) << absl::StrJoin(args, " ") << "\n" << result.out << result.err;
  return result;
}

class AgentTrustEndToEnd : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(served());
    absl::StatusOr<std::unique_ptr<RangeHttpServer>> http =
        RangeHttpServer::Start(served(), work_.path());
    ASSERT_THAT(http, IsOk());
    http_ = *std::move(http);

    // One artifact per path the default policy can hand out (the server
    // refuses a catalog missing one); this device only ever gets one.
    const std::shared_ptr<const policy::Policy> default_policy = policy::DefaultPolicy();
    uint32_t seed = 1;
    for (const std::string& name : default_policy->ReachablePathNames()) {
      artifacts_[name] = Build(name + ".bin", seed++);
    }
    WriteTextFile(profile_path(), kProfileJson);
    v1::HardwareProfile profile;
    profile.set_arch("x86_64");
    for (const char* flag : {"avx2", "avx512f", "amx_bf16", "amx_tile", "amx_int8"}) {
      profile.add_cpu_flags(flag);
    }
    profile.set_accelerator("none");
    absl::StatusOr<policy::Decision> decision =
        policy::Evaluate(*default_policy, profile, v1::PRIORITY_SPEED, {});
    ASSERT_THAT(decision, IsOk());
    expected_path_ = decision->path->name;

    // The operators' repository: v1 from init, then targets v2 listing
    // this device's build for x86_cpu, published with snapshot and
    // timestamp v2.
    Ctl({"repo", "init", "--repo", repo(), "--generate-keys", keys()});
    Sign(expected_artifact());
    Publish();
    Mirror();
    // Provisioned with the device: the first root.
    fs::create_directories(device(""));
    fs::copy_file(repo() + "/metadata/1.root.json", device("root.json"));
  }

  std::string served() const { return work_.Sub("served"); }
  std::string mirror() const { return work_.Sub("served/metadata"); }
  std::string repo() const { return work_.Sub("repo"); }
  std::string keys() const { return work_.Sub("keys"); }
  std::string key(const std::string& role) const { return keys() + "/" + role + ".pem"; }
  std::string device(const std::string& relative) const { return work_.Sub("device/" + relative); }
  std::string profile_path() const { return work_.Sub("profile.json"); }
  const v1::Artifact& expected_artifact() const { return artifacts_.at(expected_path_); }
  std::string metadata_url() const { return http_->Url("metadata"); }

  // An artifact file on the mirror, described as a catalog entry with its
  // target path (its name on the mirror).
  v1::Artifact Build(const std::string& name, uint32_t seed) {
    v1::Artifact artifact =
        WriteArtifact(served() + "/" + name, ArtifactBytes(kArtifactBytes, seed), http_->Url(name));
    artifact.set_target_path(name);
    return artifact;
  }

  // Stages the artifact in the next targets version and signs it with the
  // (offline) targets key.
  // Every build after the fixture's first is another build of the same
  // path, which the test's server pins: signed as a canary, as weightpathctl
  // wants a second build of one path to be.
  void Sign(const v1::Artifact& artifact, const std::string& hardware_classes = "x86_cpu") {
    std::vector<std::string> args = {
        "repo", "add-target", "--repo", repo(), "--path", artifact.target_path(), "--file",
        served() + "/" + artifact.target_path(), "--model", kModel, "--weight-path",
        expected_path_, "--version", "2026.12.1", "--hardware-classes", hardware_classes};
    if (artifact.target_path() != expected_artifact().target_path()) args.push_back("--canary");
    Ctl(args);
    Ctl({"repo", "sign", "--repo", repo(), "--role", "targets", "--key", key("targets")});
  }

  // `weightpathctl repo timestamp`: whatever is fully signed, with a new
  // snapshot and timestamp (the online keys).
  void Publish(const std::vector<std::string>& extra = {}, const std::string& timestamp_key = "") {
    std::vector<std::string> args = {
        "repo",           "timestamp",    "--repo",
        repo(),           "--key",        timestamp_key.empty() ? key("timestamp") : timestamp_key,
        "--snapshot-key", key("snapshot")};
    args.insert(args.end(), extra.begin(), extra.end());
    Ctl(args);
  }

  // The mirror serves what the repository published (what an operator's
  // rsync to the static server does).
  void Mirror() { CopyDirectory(repo() + "/metadata", mirror()); }
  static void CopyDirectory(const std::string& from, const std::string& to) {
    fs::remove_all(to);
    fs::create_directories(to);
    fs::copy(from, to, fs::copy_options::recursive);
  }
  std::string MirrorFile(const std::string& name) const {
    return ReadTextFile(mirror() + "/" + name);
  }
  void ServeOnMirror(const std::string& name, const std::string& bytes) {
    WriteTextFile(mirror() + "/" + name, bytes);
  }

  // A key file of the repository (e.g. an online key an attacker stole).
  trust::SigningKey LoadKey(const std::string& path) const {
    absl::StatusOr<trust::Ed25519PrivateKey> private_key =
        trust::Ed25519PrivateKey::FromPem(ReadTextFile(path));
    EXPECT_THAT(private_key, IsOk());
    return trust::MakeSigningKey(path, *std::move(private_key));
  }

  // A new ed25519 key from OpenSSL's own tool, as an operator makes one.
  std::string OpensslKey(const std::string& name) const {
    const std::string path = keys() + "/" + name + ".pem";
    const ProcessResult made =
        RunProcess({"openssl", "genpkey", "-algorithm", "ed25519", "-out", path});
    EXPECT_EQ(made.exit_code, 0) << made.err;
    return path;
  }

  // A timestamp signed with the stolen timestamp key, naming `snapshot`.
  std::string ForgedTimestamp(const std::string& snapshot, int64_t snapshot_version,
                              int64_t version) const {
    const trust::SigningKey stolen = LoadKey(key("timestamp"));
    absl::StatusOr<std::string> bytes = trust::MakeTimestamp(
        snapshot, snapshot_version, version - 1, absl::Now() + absl::Hours(24), {&stolen});
    EXPECT_THAT(bytes, IsOk());
    return bytes.ok() ? *bytes : "";
  }

  // A snapshot signed with the stolen snapshot key: `base` (a published
  // snapshot) at `version`, listing `targets` as targets.json version
  // `targets_version`.
  std::string ForgedSnapshot(const std::string& base, int64_t version, const std::string& targets,
                             int64_t targets_version) const {
    absl::StatusOr<trust::Metadata<trust::Snapshot>> snapshot =
        trust::ParseSnapshot(base, "snapshot.json");
    EXPECT_THAT(snapshot, IsOk());
    snapshot->signed_part.version = version;
    snapshot->signed_part.expires = absl::FromUnixSeconds(absl::ToUnixSeconds(absl::Now()) + 86400);
    snapshot->signed_part.meta["targets.json"] =
        trust::DescribeMetadataFile(targets, targets_version);
    const trust::SigningKey stolen = LoadKey(key("snapshot"));
    absl::StatusOr<std::string> bytes =
        trust::SignMetadata(trust::SignedToJson(snapshot->signed_part), {&stolen});
    EXPECT_THAT(bytes, IsOk());
    return bytes.ok() ? *bytes : "";
  }

  // The server's catalog: every path's artifact, `device_gets` in place of
  // this device's path.
  void ServeDecision(const v1::Artifact& device_gets, bool with_target_paths = true) {
    server_.reset();
    std::string yaml = absl::StrCat("default_model: ", kModel, "\nmodels:\n  ", kModel, ":\n");
    for (const auto& [name, catalog_artifact] : artifacts_) {
      const v1::Artifact& artifact = name == expected_path_ ? device_gets : catalog_artifact;
      if (artifact.files_size() > 0) {
        absl::StrAppend(&yaml, "    ", name, ":\n", testing::CatalogEntryYaml(artifact),
                        "      target_path: \"", artifact.target_path(), "\"\n");
        continue;
      }
      absl::StrAppend(&yaml, "    ", name, ":\n      uri: \"", artifact.uri(),
                      "\"\n      sha256: ", artifact.sha256(),
                      "\n      size_bytes: ", artifact.size_bytes(), "\n      version: \"",
                      artifact.version(), "\"\n");
      if (with_target_paths) {
        absl::StrAppend(&yaml, "      target_path: \"", artifact.target_path(), "\"\n");
      }
    }
    const std::string catalog = work_.Sub(absl::StrCat("catalog-", ++catalogs_, ".yaml"));
    WriteTextFile(catalog, yaml);
    absl::StatusOr<std::unique_ptr<ServerProcess>> server =
        ServerProcess::Start({"--catalog=" + catalog, "--reload_interval=0s",
                              "--store=sqlite:" + work_.Sub("fleet.db")});
    ASSERT_THAT(server, IsOk());
    server_ = *std::move(server);
    WriteAgentConfig(server_->grpc_address(), metadata_url());
  }

  void WriteAgentConfig(const std::string& server_address, const std::string& url) {
    WriteTextFile(
        device("agent.yaml"),
        absl::StrCat("server: ", server_address, "\n", "device_id: edge-trust-0001\n",
                     "state_dir: ", device("state"), "\n", "cache_dir: ", device("cache"), "\n",
                     "decision_file: ", device("run/decision.json"), "\n",
                     "env_file: ", device("run/engine.env"), "\n", "budget: 30\ncall_timeout: 10\n",
                     "retry_base_delay: 100ms\nretry_max_delay: 500ms\n",
                     "trust:\n  root: ", device("root.json"), "\n  metadata_url: ", url, "\n"));
  }

  ProcessResult Boot() {
    const size_t logged = http_->RequestLog().size();
    ProcessResult boot =
        RunProcess({WEIGHTPATH_AGENT_BINARY, "boot", "--config", device("agent.yaml")},
                   {{"WEIGHTPATH_HW_PROFILE", profile_path()}}, absl::Seconds(60));
    const std::vector<std::string> log = http_->RequestLog();
    last_requests_.assign(log.begin() + static_cast<std::ptrdiff_t>(std::min(logged, log.size())),
                          log.end());
    return boot;
  }

  // The first boot against the honest repository: the device runs its
  // signed build and remembers it as the last good decision.
  void BootSigned(const v1::Artifact& artifact) {
    ServeDecision(artifact);
    const ProcessResult boot = Boot();
    ASSERT_EQ(boot.exit_code, 0) << boot.err;
    ASSERT_THAT(boot.err, HasSubstr("trust: target " + artifact.target_path() + " verified"));
    installed_ = artifact;
  }

  DecisionRecord Decision() const {
    absl::StatusOr<DecisionRecord> record =
        DecisionFromJson(ReadTextFile(device("run/decision.json")), "decision.json");
    EXPECT_THAT(record, IsOk());
    return record.ok() ? *record : DecisionRecord{};
  }

  // GETs of the last boot for `path` on the mirror.
  int Requests(const std::string& path) const {
    return static_cast<int>(std::count_if(
        last_requests_.begin(), last_requests_.end(),
        [&](const std::string& line) { return absl::StartsWith(line, "GET /" + path + " "); }));
  }

  // The boot refused `refused` with `reason` and handed over the last good
  // decision: nothing of the refused build was downloaded or installed.
  void ExpectRefusedKeepingTheLastGood(const ProcessResult& boot, const v1::Artifact& refused,
                                       const std::string& reason) {
    EXPECT_EQ(boot.exit_code, 3) << boot.err;
    EXPECT_THAT(boot.err, AllOf(HasSubstr("boot: trust: the server's artifact"),
                                HasSubstr("is refused"), HasSubstr(reason),
                                HasSubstr("using the last good decision (the server's artifact "
                                          "was refused by the trust check)")));
    EXPECT_EQ(Requests(refused.target_path()), 0) << absl::StrJoin(last_requests_, "\n");
    EXPECT_FALSE(fs::exists(device("cache/" + refused.sha256())));
    EXPECT_FALSE(fs::exists(device("cache/" + refused.sha256() + ".partial")));
    const DecisionRecord decision = Decision();
    EXPECT_EQ(decision.source, DecisionSource::kLastGood);
    EXPECT_EQ(decision.response.artifact().sha256(), installed_.sha256());
    EXPECT_EQ(decision.artifact_path, device("cache/" + installed_.sha256()));
    EXPECT_THAT(boot.err, HasSubstr("reported OUTCOME_ARTIFACT_VERIFICATION_FAILED"));
    EXPECT_THAT(Outcomes(),
                Contains(AllOf(HasSubstr(absl::StrCat(v1::OUTCOME_ARTIFACT_VERIFICATION_FAILED, "|",
                                                      refused.sha256(), "|")),
                               HasSubstr(reason))));
  }

  // outcome|artifact_sha256|detail of every outcome the server stored.
  std::vector<std::string> Outcomes() const {
    const ProcessResult query =
        RunProcess({"python3", "-c",
                    "import sqlite3, sys\n"
                    "for row in sqlite3.connect(sys.argv[1]).execute("
                    "'SELECT outcome, artifact_sha256, detail FROM outcomes ORDER BY id'):\n"
                    "    print('|'.join(str(v) for v in row))\n",
                    work_.Sub("fleet.db")});
    EXPECT_EQ(query.exit_code, 0) << query.err;
    return absl::StrSplit(query.out, '\n', absl::SkipEmpty());
  }

  trust::Json TrustStatus() const {
    const ProcessResult status = RunProcess({WEIGHTPATH_AGENT_BINARY, "trust", "status", "--config",
                                             device("agent.yaml"), "-o", "json"});
    EXPECT_EQ(status.exit_code, 0) << status.err;
    absl::StatusOr<trust::Json> json = trust::ParseJson(status.out, "trust status");
    EXPECT_THAT(json, IsOk()) << status.out;
    return json.ok() ? *json : trust::Json::MakeObject();
  }
  static int64_t Version(const trust::Json& status, const std::string& role) {
    const trust::Json* entry = status.Find("roles") ? status.Find("roles")->Find(role) : nullptr;
    return entry != nullptr && entry->is_object() ? entry->Find("version")->int_value() : -1;
  }

  TempDir work_;
  std::unique_ptr<RangeHttpServer> http_;
  std::unique_ptr<ServerProcess> server_;
  std::map<std::string, v1::Artifact> artifacts_;
  std::string expected_path_;
  v1::Artifact installed_;
  std::vector<std::string> last_requests_;
  int catalogs_ = 0;
};

TEST_F(AgentTrustEndToEnd, ASignedArtifactIsInstalledAndACachedBootFetchesTwoSmallFiles) {
  ServeDecision(expected_artifact());
  const ProcessResult boot = Boot();
  ASSERT_EQ(boot.exit_code, 0) << boot.err;
  EXPECT_THAT(
      boot.err,
      AllOf(HasSubstr("trust: metadata current: root v1, timestamp v2, "
                      "snapshot v2, targets v2"),
            HasSubstr("trust: target " + expected_artifact().target_path() + " verified"),
            HasSubstr("for x86_cpu, signed by targets v2"), HasSubstr("decision from the server")));
  EXPECT_EQ(Decision().source, DecisionSource::kServer);
  EXPECT_EQ(Decision().artifact_path, device("cache/" + expected_artifact().sha256()));
  EXPECT_EQ(Requests(expected_artifact().target_path()), 1);
  EXPECT_EQ(Requests("metadata/2.snapshot.json"), 1);
  EXPECT_EQ(Requests("metadata/2.targets.json"), 1);
  ASSERT_TRUE(fs::exists(device("state/trust-state.json")));

  // Nothing changed: the probe for root v2, the timestamp, and no download.
  const fs::file_time_type saved = fs::last_write_time(device("state/trust-state.json"));
  const ProcessResult cached = Boot();
  ASSERT_EQ(cached.exit_code, 0) << cached.err;
  EXPECT_THAT(cached.err, HasSubstr("timestamp unchanged"));
  EXPECT_THAT(last_requests_,
              ::testing::ElementsAre(HasSubstr("GET /metadata/2.root.json range=- status=404"),
                                     HasSubstr("GET /metadata/timestamp.json range=- status=200")));
  EXPECT_EQ(fs::last_write_time(device("state/trust-state.json")), saved) << "not rewritten";

  // What the device trusts, with no network: versions, expiries, key ids.
  http_->Stop();
  const trust::Json status = TrustStatus();
  EXPECT_EQ(Version(status, "root"), 1);
  EXPECT_EQ(Version(status, "timestamp"), 2);
  EXPECT_EQ(Version(status, "snapshot"), 2);
  EXPECT_EQ(Version(status, "targets"), 2);
  absl::StatusOr<trust::Metadata<trust::Root>> root =
      trust::ParseRoot(ReadTextFile(device("root.json")), "root.json");
  ASSERT_THAT(root, IsOk());
  for (const char* role : {"root", "timestamp", "snapshot", "targets"}) {
    const trust::Json& entry = *status.Find("roles")->Find(role);
    EXPECT_EQ(entry.Find("keyids")->array().at(0).string_value(),
              root->signed_part.roles.at(role).keyids.at(0))
        << role;
    EXPECT_FALSE(entry.Find("expired")->bool_value()) << role;
    EXPECT_TRUE(entry.Find("verified")->bool_value()) << role;
  }
  const ProcessResult text =
      RunProcess({WEIGHTPATH_AGENT_BINARY, "trust", "status", "--config", device("agent.yaml")});
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, AllOf(HasSubstr(device("state/trust-state.json")),
                              HasSubstr("targets    v2  expires"), HasSubstr("1 target(s)"),
                              HasSubstr(root->signed_part.roles.at("targets").keyids.at(0))));
}

TEST_F(AgentTrustEndToEnd, AnArtifactTheTargetsDoNotListIsRefused) {
  BootSigned(expected_artifact());
  // A compromised server names a file that is on the mirror, with its true
  // digest and size, but that nobody signed.
  const v1::Artifact rogue = Build("rogue.bin", 66);
  ServeDecision(rogue);
  ExpectRefusedKeepingTheLastGood(
      Boot(), rogue, "target \"rogue.bin\" is not listed by the trusted targets metadata");
}

TEST_F(AgentTrustEndToEnd, TheRightNameWithOtherBytesOrLengthIsRefused) {
  BootSigned(expected_artifact());
  // The signed name, other bytes.
  v1::Artifact other_bytes = Build("unsigned-v2.bin", 67);
  other_bytes.set_target_path(expected_artifact().target_path());
  ServeDecision(other_bytes);
  const ProcessResult boot = Boot();
  EXPECT_EQ(boot.exit_code, 3) << boot.err;
  EXPECT_THAT(boot.err, AllOf(HasSubstr("signed sha256 " + expected_artifact().sha256()),
                              HasSubstr("the decision says " + other_bytes.sha256())));
  EXPECT_EQ(Requests("unsigned-v2.bin"), 0);
  EXPECT_EQ(Decision().source, DecisionSource::kLastGood);

  // The signed name and digest, another length.
  v1::Artifact other_length = expected_artifact();
  other_length.set_size_bytes(kArtifactBytes + 4096);
  ServeDecision(other_length);
  const ProcessResult longer = Boot();
  EXPECT_EQ(longer.exit_code, 3) << longer.err;
  EXPECT_THAT(longer.err, HasSubstr(absl::StrCat("signed length ", kArtifactBytes,
                                                 ", the decision says ", kArtifactBytes + 4096)));

  // The decision is the signed one, but the mirror's file has grown: the
  // download stops at the signed length and the bytes are discarded.
  const v1::Artifact next = Build("next.bin", 68);
  Sign(next);
  Publish();
  Mirror();
  WriteTextFile(served() + "/next.bin",
                ArtifactBytes(kArtifactBytes, 68) + "appended by the mirror");
  ServeDecision(next);
  const ProcessResult grown = Boot();
  EXPECT_EQ(grown.exit_code, 3) << grown.err;
  EXPECT_THAT(grown.err, AllOf(HasSubstr("trust: target next.bin verified"), HasSubstr("DATA_LOSS"),
                               HasSubstr("is larger than artifact.size_bytes")));
  EXPECT_FALSE(fs::exists(device("cache/" + next.sha256())));
  EXPECT_EQ(Decision().response.artifact().sha256(), installed_.sha256());
}

TEST_F(AgentTrustEndToEnd, ABuildSignedForAnotherHardwareClassIsRefused) {
  BootSigned(expected_artifact());
  const v1::Artifact arm = Build("w4a16-arm.bin", 69);
  Sign(arm, "arm64_cpu,jetson");
  Publish();
  Mirror();
  ServeDecision(arm);
  ExpectRefusedKeepingTheLastGood(Boot(), arm,
                                  "signed for hardware classes arm64_cpu, jetson, not x86_cpu");
}

TEST_F(AgentTrustEndToEnd, RollbacksOfTimestampSnapshotAndTargetsAreRefused) {
  // Targets v3 lists an old build; v4 revokes it and lists a new one.
  const v1::Artifact old_build = Build("old-build.bin", 70);
  Sign(old_build);
  Publish();
  Mirror();
  const std::string v3 = work_.Sub("mirror-v3");
  CopyDirectory(mirror(), v3);
  Ctl({"repo", "remove-target", "--repo", repo(), "--path", old_build.target_path()});
  const v1::Artifact new_build = Build("new-build.bin", 71);
  Sign(new_build);
  Publish();
  Mirror();
  BootSigned(new_build);
  ASSERT_EQ(Version(TrustStatus(), "targets"), 4);

  // The server names the revoked build; the mirror serves what would list it.
  ServeDecision(old_build);
  CopyDirectory(v3, mirror());
  ExpectRefusedKeepingTheLastGood(
      Boot(), old_build, "timestamp.json: version 3 is older than the trusted 4 (rollback)");

  // With the stolen timestamp key: a new timestamp naming the old snapshot.
  Mirror();
  ServeOnMirror("timestamp.json", ForgedTimestamp(ReadTextFile(v3 + "/3.snapshot.json"), 3, 5));
  ExpectRefusedKeepingTheLastGood(
      Boot(), old_build,
      "timestamp.json: names snapshot version 3, older than the trusted 4 (rollback)");

  // With the stolen snapshot key too: a new snapshot listing the old targets.
  const std::string snapshot =
      ForgedSnapshot(MirrorFile("4.snapshot.json"), 5, ReadTextFile(v3 + "/3.targets.json"), 3);
  ServeOnMirror("5.snapshot.json", snapshot);
  ServeOnMirror("timestamp.json", ForgedTimestamp(snapshot, 5, 5));
  ExpectRefusedKeepingTheLastGood(Boot(), old_build,
                                  "targets.json version 3 is older than the trusted 4 (rollback)");
  EXPECT_EQ(Version(TrustStatus(), "targets"), 4);
}

TEST_F(AgentTrustEndToEnd, AnExpiredTimestampBlocksANewBuildButNotTheInstalledOne) {
  // A timestamp that lives 10 s; the mirror then stops updating (frozen).
  Publish({"--expires", "10s"});
  Mirror();
  const absl::Time published = absl::Now();
  BootSigned(expected_artifact());
  const v1::Artifact next = Build("next.bin", 72);
  Sign(next);
  Publish();  // never reaches the frozen mirror
  absl::SleepFor(published + absl::Seconds(11) - absl::Now());

  // The installed build still boots from the server's decision...
  ServeDecision(expected_artifact());
  const ProcessResult same = Boot();
  EXPECT_EQ(same.exit_code, 0) << same.err;
  EXPECT_THAT(same.err, AllOf(HasSubstr("(freeze attack)"),
                              HasSubstr("is the artifact already installed (verified when it was "
                                        "installed): kept"),
                              HasSubstr("decision from the server")));
  // ...a new one does not.
  ServeDecision(next);
  const size_t outcomes_before = Outcomes().size();
  ExpectRefusedKeepingTheLastGood(Boot(), next, "expired at");
  // The refusal is reported, and so is the boot of the build kept (last in
  // order, as OUTCOME_BOOT_OK from the last good decision).
  const std::vector<std::string> outcomes = Outcomes();
  ASSERT_GT(outcomes.size(), outcomes_before);
  EXPECT_THAT(std::vector<std::string>(outcomes.begin() + outcomes_before, outcomes.end()),
              Contains(HasSubstr("(freeze attack)")));
  const trust::Json status = TrustStatus();
  EXPECT_TRUE(status.Find("roles")->Find("timestamp")->Find("expired")->bool_value());
  EXPECT_THAT(trust::CanonicalJson(*status.Find("notes")),
              HasSubstr("no new artifact is installed until a fresh one is fetched"));
}

TEST_F(AgentTrustEndToEnd, ASnapshotThatIsNotTheOneTheTimestampNamesIsRefused) {
  BootSigned(expected_artifact());
  const v1::Artifact next = Build("next.bin", 73);
  Sign(next);
  Publish();
  Mirror();
  // Mix and match: the new timestamp, an old snapshot under the new name.
  ServeOnMirror("3.snapshot.json", MirrorFile("2.snapshot.json"));
  ServeDecision(next);
  ExpectRefusedKeepingTheLastGood(Boot(), next, "(mix-and-match, or the file was replaced)");
}

TEST_F(AgentTrustEndToEnd, OversizedAndEndlessMetadataIsCutAtItsLimit) {
  BootSigned(expected_artifact());
  const v1::Artifact next = Build("next.bin", 74);
  Sign(next);
  Publish();
  Mirror();
  ServeDecision(next);

  // A root that announces 1 MiB: refused before its body.
  ServeOnMirror("2.root.json", std::string(1 << 20, ' '));
  ExpectRefusedKeepingTheLastGood(Boot(), next,
                                  "2.root.json: more than the 512000 bytes allowed; stopped "
                                  "reading (endless data)");
  fs::remove(mirror() + "/2.root.json");

  // A mirror that never stops sending the timestamp, with no length.
  const std::string script = work_.Sub("endless_mirror.py");
  WriteTextFile(script, kEndlessMirror);
  ::weightpath::testing::SpawnOptions options;
  options.pipe_stdout = true;
  absl::StatusOr<std::unique_ptr<::weightpath::testing::Subprocess>> endless =
      ::weightpath::testing::Subprocess::Start({"python3", script, mirror(), "timestamp.json"},
                                               options);
  ASSERT_THAT(endless, IsOk());
  absl::StatusOr<std::string> port = (*endless)->WaitForLine("PORT ", absl::Seconds(30));
  ASSERT_THAT(port, IsOk());
  WriteAgentConfig(server_->grpc_address(), "http://127.0.0.1:" + port->substr(5));
  const ProcessResult boot = Boot();
  ExpectRefusedKeepingTheLastGood(boot, next,
                                  "timestamp.json: more than the 16384 bytes allowed; stopped "
                                  "reading (endless data)");
  EXPECT_LT(boot.wall_time, absl::Seconds(20));
  // The agent hung up: the mirror logged what it managed to send.
  std::string log;
  for (int i = 0; i < 100 && log.empty(); ++i) {
    log = ReadTextFile(work_.Sub("served/endless.log"));
    if (log.empty()) absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_THAT(log, HasSubstr("timestamp.json "));
}

// A metadata mirror answering a status line that is not UTF-8: the refusal
// quoted it, and the ARTIFACT_VERIFICATION_FAILED report carrying it could
// not be parsed by the server, so the fleet never heard of it.
TEST_F(AgentTrustEndToEnd, AMirrorAnswerThatIsNotUtf8StillReachesTheServerInTheReport) {
  BootSigned(expected_artifact());
  const v1::Artifact next = Build("next.bin", 79);
  Sign(next);
  Publish();
  Mirror();
  ServeDecision(next);
  testing::CannedHttpServer mirror("HTTP/1.1 2\xff\xfe OK\r\nContent-Length: 0\r\n\r\n");
  WriteAgentConfig(server_->grpc_address(), mirror.Url("/metadata"));
  ExpectRefusedKeepingTheLastGood(Boot(), next, "2\\xff\\xfe OK");
}

TEST_F(AgentTrustEndToEnd, TargetsSignedBelowThresholdAreRefused) {
  BootSigned(expected_artifact());
  // An attacker with the online keys but not the offline targets key lists
  // a build of their own and signs the targets with a key of their own.
  const v1::Artifact rogue = Build("rogue.bin", 75);
  absl::StatusOr<trust::Metadata<trust::Targets>> targets =
      trust::ParseTargets(MirrorFile("2.targets.json"), "2.targets.json");
  ASSERT_THAT(targets, IsOk());
  trust::TargetFile file;
  file.length = static_cast<int64_t>(rogue.size_bytes());
  file.hashes["sha256"] = rogue.sha256();
  file.custom = trust::WeightpathTargetToJson({kModel, expected_path_, "evil", {"x86_cpu"}});
  targets->signed_part.targets["rogue.bin"] = file;
  targets->signed_part.version = 3;
  absl::StatusOr<trust::Ed25519PrivateKey> attacker = trust::Ed25519PrivateKey::Generate();
  ASSERT_THAT(attacker, IsOk());
  const trust::SigningKey attacker_key = trust::MakeSigningKey("attacker", *std::move(attacker));
  absl::StatusOr<std::string> forged =
      trust::SignMetadata(trust::SignedToJson(targets->signed_part), {&attacker_key});
  ASSERT_THAT(forged, IsOk());
  ServeOnMirror("3.targets.json", *forged);
  const std::string snapshot = ForgedSnapshot(MirrorFile("2.snapshot.json"), 3, *forged, 3);
  ServeOnMirror("3.snapshot.json", snapshot);
  ServeOnMirror("timestamp.json", ForgedTimestamp(snapshot, 3, 3));
  ServeDecision(rogue);
  ExpectRefusedKeepingTheLastGood(
      Boot(), rogue,
      "3.targets.json: 0 of the 1 signatures required from the targets keys of root v1 (below "
      "threshold)");
}

TEST_F(AgentTrustEndToEnd, ARootRotationSignedOnlyByTheNewKeysIsRefused) {
  BootSigned(expected_artifact());
  const v1::Artifact next = Build("next.bin", 76);
  Sign(next);
  Publish();
  Mirror();
  // A root v2 that hands the root role to a key the attacker holds, signed
  // by that key only (weightpathctl stages it but will not publish it).
  const std::string attacker = OpensslKey("attacker-root");
  Ctl({"repo", "rotate-root", "--repo", repo(), "--role", "root", "--keys", attacker});
  Ctl({"repo", "sign", "--repo", repo(), "--role", "root", "--key", attacker});
  ServeOnMirror("2.root.json", ReadTextFile(repo() + "/staged/root.json"));
  ServeDecision(next);
  ExpectRefusedKeepingTheLastGood(
      Boot(), next,
      "2.root.json: 0 of the 1 signatures required from the root keys of root v1 (below "
      "threshold)");
  EXPECT_EQ(Version(TrustStatus(), "root"), 1);
}

TEST_F(AgentTrustEndToEnd, ARootRotationSignedByBothThresholdsIsFollowed) {
  BootSigned(expected_artifact());
  const std::string new_root = OpensslKey("root-2");
  Ctl({"repo", "rotate-root", "--repo", repo(), "--role", "root", "--keys", new_root});
  Ctl({"repo", "sign", "--repo", repo(), "--role", "root", "--key",
       absl::StrCat(key("root"), ",", new_root)});
  const v1::Artifact next = Build("next.bin", 77);
  Sign(next);
  Publish();
  Mirror();
  ServeDecision(next);
  const ProcessResult boot = Boot();
  ASSERT_EQ(boot.exit_code, 0) << boot.err;
  EXPECT_THAT(boot.err, AllOf(HasSubstr("trust: followed the root from v1 to v2"),
                              HasSubstr("trust: target next.bin verified")));
  EXPECT_EQ(Decision().response.artifact().sha256(), next.sha256());
  const trust::Json status = TrustStatus();
  EXPECT_EQ(Version(status, "root"), 2);
  EXPECT_EQ(status.Find("roles")->Find("root")->Find("keyids")->array().at(0).string_value(),
            LoadKey(new_root).key.keyid);
  // The provisioned v1 root was only the starting point: the next boot
  // probes for root v3.
  const ProcessResult again = Boot();
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(Requests("metadata/3.root.json"), 1);
  EXPECT_EQ(Requests("metadata/2.root.json"), 0);
}

TEST_F(AgentTrustEndToEnd, ARotatedTimestampKeyRecoversFromAFastForward) {
  BootSigned(expected_artifact());
  // The stolen timestamp key pushes the device's timestamp to v1000.
  ServeOnMirror("timestamp.json", ForgedTimestamp(MirrorFile("2.snapshot.json"), 2, 1000));
  const ProcessResult pushed = Boot();
  ASSERT_EQ(pushed.exit_code, 0) << pushed.err;
  ASSERT_EQ(Version(TrustStatus(), "timestamp"), 1000);

  // The operators' next honest timestamp is v3: refused as a rollback.
  const v1::Artifact next = Build("next.bin", 78);
  Sign(next);
  Publish();
  Mirror();
  ServeDecision(next);
  ExpectRefusedKeepingTheLastGood(Boot(), next,
                                  "version 3 is older than the trusted 1000 (rollback)");

  // They rotate the timestamp key (root v2): the device drops the pushed
  // timestamp and snapshot and takes the new ones.
  const std::string new_timestamp = OpensslKey("timestamp-2");
  Ctl({"repo", "rotate-root", "--repo", repo(), "--role", "timestamp", "--keys", new_timestamp});
  Ctl({"repo", "sign", "--repo", repo(), "--role", "root", "--key", key("root")});
  Publish({}, new_timestamp);
  Mirror();
  const ProcessResult recovered = Boot();
  ASSERT_EQ(recovered.exit_code, 0) << recovered.err;
  EXPECT_THAT(recovered.err,
              AllOf(HasSubstr("root v2 changed the timestamp keys: the persisted timestamp and "
                              "snapshot are dropped (fast-forward recovery)"),
                    HasSubstr("trust: target next.bin verified")));
  const trust::Json status = TrustStatus();
  EXPECT_EQ(Version(status, "root"), 2);
  EXPECT_EQ(Version(status, "timestamp"), 4);
  EXPECT_EQ(status.Find("roles")->Find("timestamp")->Find("keyids")->array().at(0).string_value(),
            LoadKey(new_timestamp).key.keyid);
}

TEST_F(AgentTrustEndToEnd, APlainCatalogWithoutTargetPathsIsRefused) {
  BootSigned(expected_artifact());
  ServeDecision(expected_artifact(), /*with_target_paths=*/false);
  const ProcessResult boot = Boot();
  EXPECT_EQ(boot.exit_code, 3) << boot.err;
  EXPECT_THAT(boot.err, HasSubstr("artifact.target_path: empty"));
}

TEST_F(AgentTrustEndToEnd, RunRefusesAnUnsignedNewBuildAndReportsIt) {
  BootSigned(expected_artifact());
  const v1::Artifact rogue = Build("rogue.bin", 79);
  ServeDecision(rogue);
  for (int pass = 0; pass < 2; ++pass) {
    const ProcessResult run =
        RunProcess({WEIGHTPATH_AGENT_BINARY, "run", "--config", device("agent.yaml"), "--once"},
                   {{"WEIGHTPATH_HW_PROFILE", profile_path()}}, absl::Seconds(60));
    EXPECT_EQ(run.exit_code, 1) << run.err;
    EXPECT_THAT(run.err, AllOf(HasSubstr("trust: metadata current"),
                               HasSubstr("run: trust: new artifact for " + expected_path_ +
                                         " refused, keeping the current decision"),
                               HasSubstr("is not listed by the trusted targets metadata")));
  }
  EXPECT_EQ(Decision().response.artifact().sha256(), installed_.sha256());
  const std::vector<std::string> outcomes = Outcomes();
  EXPECT_EQ(
      std::count_if(outcomes.begin(), outcomes.end(),
                    [&](const std::string& row) { return absl::StrContains(row, rogue.sha256()); }),
      2)
      << "one report per run process (a pass that refuses the same build again stays quiet)";
  EXPECT_FALSE(fs::exists(device("cache/" + rogue.sha256())));
}

// A directory build is one signed target: its manifest (every file's path,
// size and SHA-256). The device installs it only when the files the server
// lists make exactly the signed manifest, and each file's bytes match it.
class AgentTrustDirectoryBuild : public AgentTrustEndToEnd {
 protected:
  // A model directory on the mirror under served()/<name>/, described as
  // the catalog entry naming target <name>.
  v1::Artifact DirectoryBuild(const std::string& name, uint32_t seed) {
    files_[name] = testing::ModelDirectoryFiles(256 * 1024, seed, seed + 1);
    v1::Artifact build = testing::WriteModelBuild(served() + "/" + name, files_[name],
                                                  http_->Url(name + "/"), "2026.12.2");
    build.set_target_path(name);
    return build;
  }
  // `weightpathctl repo add-target --dir`, signed and published.
  void SignDirectory(const v1::Artifact& build) {
    Ctl({"repo", "add-target", "--repo", repo(), "--path", build.target_path(), "--dir",
         served() + "/" + build.target_path(), "--model", kModel, "--weight-path", expected_path_,
         "--version", "2026.12.2", "--hardware-classes", "x86_cpu", "--canary"});
    Ctl({"repo", "sign", "--repo", repo(), "--role", "targets", "--key", key("targets")});
    Publish();
    Mirror();
  }
  std::string BuildDir(const v1::Artifact& build) const {
    return device("cache/builds/" + build.sha256());
  }
  // Boot kept the signed build `good` (exit 3, its directory untouched).
  void ExpectLastGoodBuild(const ProcessResult& boot, const v1::Artifact& good) {
    EXPECT_EQ(boot.exit_code, 3) << boot.err;
    const DecisionRecord decision = Decision();
    EXPECT_EQ(decision.source, DecisionSource::kLastGood);
    EXPECT_EQ(decision.artifact_path, BuildDir(good));
    for (const testing::ModelFileSpec& spec : files_[good.target_path()]) {
      EXPECT_EQ(ReadTextFile(BuildDir(good) + "/" + spec.path), spec.bytes) << spec.path;
    }
  }
  std::map<std::string, std::vector<testing::ModelFileSpec>> files_;
};

TEST_F(AgentTrustDirectoryBuild, ASignedDirectoryBuildIsInstalledAndEveryAttackOnItRefused) {
  const v1::Artifact good = DirectoryBuild("models/spark/w4a8-amx/2026.12.2", 11);
  SignDirectory(good);
  ServeDecision(good);
  const ProcessResult boot = Boot();
  ASSERT_EQ(boot.exit_code, 0) << boot.err;
  EXPECT_THAT(boot.err, HasSubstr("trust: target " + good.target_path() + " verified"));
  EXPECT_EQ(Decision().artifact_path, BuildDir(good));
  for (const testing::ModelFileSpec& spec : files_[good.target_path()]) {
    EXPECT_EQ(ReadTextFile(BuildDir(good) + "/" + spec.path), spec.bytes) << spec.path;
  }
  // `repo verify --dir` checks the mirror's copy as the device did.
  const ProcessResult verified =
      Ctl({"repo", "verify", "--metadata-dir", mirror(), "--root", device("root.json"), "--target",
           good.target_path(), "--dir", served() + "/" + good.target_path()});
  EXPECT_THAT(verified.out, HasSubstr("holds exactly the signed build (6 file(s)"));

  // A manifest signed by no one: the files are on the mirror and listed by
  // the server with their true digests, but no target lists their manifest.
  const v1::Artifact unsigned_build = DirectoryBuild("models/spark/w4a8-amx/rogue", 21);
  ServeDecision(unsigned_build);
  ProcessResult refused = Boot();
  ExpectLastGoodBuild(refused, good);
  EXPECT_THAT(refused.err, HasSubstr("is not listed by the trusted targets metadata"));
  EXPECT_EQ(Requests(unsigned_build.target_path() + "/config.json"), 0);

  // The signed build's name, with a file added to the server's list: the
  // list no longer makes the signed manifest.
  v1::Artifact added = good;
  v1::BuildFile* extra = added.add_files();
  *extra = good.files(0);
  extra->set_path("extra.json");
  const trust::BuildManifestDigest digest =
      trust::DigestBuildManifest(trust::ToBuildManifestFiles(added.files()));
  added.set_sha256(digest.sha256);
  added.set_size_bytes(digest.size_bytes);
  ServeDecision(added);
  refused = Boot();
  ExpectLastGoodBuild(refused, good);
  EXPECT_THAT(refused.err, HasSubstr(absl::StrCat("signed length ", good.size_bytes(),
                                                 ", the decision says ", digest.size_bytes)));

  // A signed build whose shard the mirror swaps for another build's (a
  // valid safetensors file, just not this one): refused after the bytes,
  // nothing of it published.
  const v1::Artifact next = DirectoryBuild("models/spark/w4a8-amx/2026.12.3", 31);
  SignDirectory(next);
  WriteTextFile(served() + "/" + next.target_path() + "/" + files_[next.target_path()][4].path,
                files_[good.target_path()][4].bytes);
  ServeDecision(next);
  refused = Boot();
  ExpectLastGoodBuild(refused, good);
  EXPECT_THAT(refused.err, HasSubstr("DATA_LOSS"));
  EXPECT_FALSE(fs::exists(BuildDir(next)));
  EXPECT_THAT(Outcomes(), Contains(HasSubstr(absl::StrCat(
                              v1::OUTCOME_ARTIFACT_VERIFICATION_FAILED, "|", next.sha256(), "|"))));
}

}  // namespace
}  // namespace weightpath::agent
