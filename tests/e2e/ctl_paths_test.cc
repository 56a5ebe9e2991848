// weightpathctl paths and resolve --dry-run against the real server with a
// SQLite fleet store: every weight path of the policy for an example profile
// in its group with the fleet's evidence, and an operator's resolve that
// adds no device to the fleet.
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "deploy/rollout_bucket.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/server/fleet_client.h"
#include "tests/server/server_process.h"
#include "tests/support/subprocess.h"
#include "weightpath/v1/fleet.pb.h"
#include "weightpath/v1/rollout.pb.h"

namespace weightpath::server::testing {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using weightpath::testing::ProcessResult;
using weightpath::testing::RunProcess;

std::string ExampleProfilePath(const std::string& name) {
  return std::string(WEIGHTPATH_EXAMPLE_PROFILES_DIR) + "/" + name + ".json";
}

std::string ReadFileOrDie(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_TRUE(in.good() || in.eof()) << path;
  return text.str();
}

class CtlPathsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteSecretFileOrDie(dir_.File("token"), std::string(kAdminToken) + "\n");
    auto started = ServerProcess::Start(
        {"--store=sqlite:" + dir_.File("fleet.db"), "--admin_token_file=" + dir_.File("token"),
         "--fleet_refresh_interval=100ms", "--registry_flush_period=50ms"});
    ASSERT_TRUE(started.ok()) << started.status();
    server_ = *std::move(started);
    device_stub_ = v1::WeightPath::NewStub(PlaintextChannel(server_->grpc_address()));
  }

  ProcessResult Ctl(std::vector<std::string> args) {
    std::vector<std::string> argv = {WEIGHTPATHCTL_PATH};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.push_back("--server=" + server_->grpc_address());
    argv.push_back("--token-file=" + dir_.File("token"));
    return RunProcess(argv);
  }

  // resolve is a device call: the server, no operator token.
  ProcessResult Resolve(std::vector<std::string> args) {
    std::vector<std::string> argv = {WEIGHTPATHCTL_PATH, "resolve"};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.push_back("--server=" + server_->grpc_address());
    return RunProcess(argv);
  }

  bool Registered(const std::string& device_id) {
    return Ctl({"device", "show", device_id}).exit_code == 0;
  }

  // Two 8480+ AMX machines, a Zen 4 and an RTX 4090, each resolved as
  // itself and waited for in the registry.
  void RegisterFourDevices() {
    for (const auto& [device, profile] : std::vector<std::pair<std::string, std::string>>{
             {"amx-1", ExampleProfilePath("intel-sapphire-rapids")},
             {"amx-2", ExampleProfilePath("intel-sapphire-rapids")},
             {"zen-1", ExampleProfilePath("amd-zen4")},
             {"gpu-1", ExampleProfilePath("rtx-4090")}}) {
      ProcessResult resolved = Resolve({"--profile", profile, "--device-id", device});
      ASSERT_EQ(resolved.exit_code, 0) << resolved.err;
    }
    ASSERT_TRUE(Eventually([&] {
      return Registered("amx-1") && Registered("amx-2") && Registered("zen-1") &&
             Registered("gpu-1");
    })) << server_->Log();
  }

  // The Sapphire Rapids example as the policy's reference machine reports
  // itself (an 8480C, whose figures the policy has), written to a file.
  std::string ReferenceMachineProfile() {
    const std::string text = absl::StrReplaceAll(
        ReadFileOrDie(ExampleProfilePath("intel-sapphire-rapids")), {{"8480+", "8480C"}});
    const std::string path = dir_.File("xeon-8480c.json");
    WriteFileOrDie(path, text);
    return path;
  }

  TempDir dir_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<v1::WeightPath::Stub> device_stub_;
};

v1::ExplainDecisionResponse ParseExplain(const std::string& json) {
  v1::ExplainDecisionResponse response;
  const auto parsed = google::protobuf::util::JsonStringToMessage(json, &response);
  EXPECT_TRUE(parsed.ok()) << parsed.ToString() << "\n" << json;
  return response;
}

std::map<std::string, v1::PathCandidate> ByPath(const v1::ExplainDecisionResponse& response) {
  std::map<std::string, v1::PathCandidate> paths;
  for (const v1::PathCandidate& path : response.paths()) {
    EXPECT_TRUE(paths.emplace(path.path(), path).second) << "listed twice: " << path.path();
  }
  return paths;
}

TEST_F(CtlPathsTest, EveryPathInItsGroupWithTheFleetsEvidenceAgainstThePolicysFigure) {
  const std::string profile_path = ReferenceMachineProfile();
  // Two devices of that machine resolve (as themselves, so they are
  // registered) and report the AMX build, one at 90 tok/s and one at 80:
  // the median is 85 against the policy's 86.6.
  int n = 0;
  for (const double decode : {90.0, 80.0}) {
    const std::string device = absl::StrCat("xeon-", ++n);
    ProcessResult resolved =
        Resolve({"--profile", profile_path, "--device-id", device, "-o", "json"});
    ASSERT_EQ(resolved.exit_code, 0) << resolved.err;
    ASSERT_THAT(resolved.out, HasSubstr("\"path_id\": \"w4a8-amx\""));
    v1::ReportMeasurementResponse reported;
    ASSERT_TRUE(
        Report(*device_stub_, Measurement(absl::StrCat("m-", device), device, "w4a8-amx", decode, 24),
               &reported)
            .ok())
        << server_->Log();
  }

  ProcessResult json = Ctl({"paths", "--profile", profile_path, "-o", "json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const v1::ExplainDecisionResponse response = ParseExplain(json.out);
  std::map<std::string, v1::PathCandidate> paths = ByPath(response);
  // The default policy's eight path definitions, each once.
  EXPECT_EQ(paths.size(), 8u) << json.out;

  const v1::PathCandidate& amx = paths["w4a8-amx"];
  EXPECT_EQ(amx.standing(), v1::PathCandidate::STANDING_CHOSEN);
  EXPECT_THAT(amx.chosen_for(), ElementsAre(v1::PRIORITY_SPEED));
  EXPECT_EQ(amx.reason(), "chosen by rule x86-amx-speed at priority speed");
  EXPECT_EQ(amx.devices_reported(), 2u);
  ASSERT_TRUE(amx.has_median_decode_tok_s());
  EXPECT_DOUBLE_EQ(amx.median_decode_tok_s(), 85.0);
  ASSERT_TRUE(amx.has_expected_decode_tok_s());
  EXPECT_DOUBLE_EQ(amx.expected_decode_tok_s(), 86.6);
  EXPECT_EQ(amx.verification().source(), v1::Verification::SOURCE_POLICY);

  const v1::PathCandidate& tinygemm = paths["w4a16-tinygemm-x86"];
  EXPECT_EQ(tinygemm.standing(), v1::PathCandidate::STANDING_CHOSEN);
  EXPECT_THAT(tinygemm.chosen_for(), ElementsAre(v1::PRIORITY_FIDELITY));
  EXPECT_EQ(tinygemm.devices_reported(), 0u);
  EXPECT_FALSE(tinygemm.has_median_decode_tok_s());
  EXPECT_DOUBLE_EQ(tinygemm.expected_decode_tok_s(), 80.0);

  const v1::PathCandidate& gpu = paths["bf16-cuda"];
  EXPECT_EQ(gpu.standing(), v1::PathCandidate::STANDING_INCOMPATIBLE);
  EXPECT_EQ(gpu.reason(),
            "rule cuda-discrete-bf16 needs hardware_class cuda_discrete; this device is x86_cpu");
  EXPECT_FALSE(gpu.has_expected_decode_tok_s());
  EXPECT_EQ(paths["w4a16-tinygemm-arm64"].standing(), v1::PathCandidate::STANDING_INCOMPATIBLE);

  ProcessResult table = Ctl({"paths", "--profile", profile_path});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out,
              AllOf(HasSubstr("x86_cpu, CPU Intel(R) Xeon(R) Platinum 8480C), policy sha256:"),
                    HasSubstr("chosen (2 paths)\n  w4a8-amx  for speed\n"),
                    HasSubstr("    why         chosen by rule x86-amx-speed at priority speed\n"),
                    HasSubstr("    fleet       2 devices of this class and CPU model reported "
                              "it: median 85 tok/s decode, expected 86.6 tok/s\n"),
                    HasSubstr("    fleet       no device of this class and CPU model reported "
                              "it; expected 80 tok/s\n"),
                    HasSubstr("  w4a16-tinygemm-x86  for fidelity\n"),
                    HasSubstr("compatible (0 paths)\n"), HasSubstr("incompatible (6 paths)\n"),
                    HasSubstr("    why         rule jetson-bf16 needs hardware_class jetson; "
                              "this device is x86_cpu\n")));
  ProcessResult yaml = Ctl({"paths", "--profile", profile_path, "-o", "yaml"});
  ASSERT_EQ(yaml.exit_code, 0) << yaml.err;
  EXPECT_THAT(yaml.out, AllOf(HasSubstr("paths:\n  - path: \"export-qnn-w8a16\""),
                              HasSubstr("standing: \"STANDING_INCOMPATIBLE\"")));
}

// The example profile as shipped: an 8480+, a CPU the policy has no figure
// for, and with AMX; the same for a CPU without AMX and a GPU.
TEST_F(CtlPathsTest, TheExampleProfilesEachListEveryPathOnce) {
  for (const char* name : {"intel-sapphire-rapids", "amd-zen4", "rtx-4090", "jetson-agx-orin",
                           "aws-graviton3", "snapdragon-8gen2", "raspberry-pi-5", "tesla-t4"}) {
    SCOPED_TRACE(name);
    ProcessResult json = Ctl({"paths", "--profile", ExampleProfilePath(name), "-o", "json"});
    ASSERT_EQ(json.exit_code, 0) << json.err;
    const v1::ExplainDecisionResponse response = ParseExplain(json.out);
    std::map<std::string, v1::PathCandidate> paths = ByPath(response);
    EXPECT_EQ(paths.size(), 8u);
    // The decision at speed is one of the chosen, for speed.
    const v1::PathCandidate& decided = paths[response.decision().weight_path().path_id()];
    EXPECT_EQ(decided.standing(), v1::PathCandidate::STANDING_CHOSEN);
    EXPECT_EQ(decided.chosen_for(0), v1::PRIORITY_SPEED);
    for (const auto& [id, path] : paths) {
      EXPECT_NE(path.standing(), v1::PathCandidate::STANDING_UNSPECIFIED) << id;
      EXPECT_FALSE(path.reason().empty()) << id;
      EXPECT_TRUE(path.has_verification()) << id;
    }
  }
  ProcessResult zen = Ctl({"paths", "--profile", ExampleProfilePath("amd-zen4")});
  ASSERT_EQ(zen.exit_code, 0) << zen.err;
  EXPECT_THAT(zen.out,
              AllOf(HasSubstr("chosen (1 path)\n  w4a16-tinygemm-x86  for speed and fidelity\n"),
                    HasSubstr("    why         rule x86-amx-speed needs one of the CPU flags "
                              "amx_tile, amx_bf16; this device has none of them\n"),
                    HasSubstr("    fleet       no device of this class and CPU model reported "
                              "it; the policy has no decode figure for this CPU\n")));
  ProcessResult labelled = Ctl({"paths", "--profile", ExampleProfilePath("amd-zen4"), "--labels",
                                "workload=agentic", "--model", "Spark-X2.5-1.7B"});
  EXPECT_EQ(labelled.exit_code, 0) << labelled.err;
}

// A registered device is evaluated on the profile it sent. Before, the
// registry kept only a summary, and "explain" of a bf16 GPU device said
// "cuda-discrete-bf16 -> bf16-cuda: no match (supports_bf16)" though the
// device resolves bf16; "paths" took only --profile; "device show" had no
// GPU, memory or L4T to show.
TEST_F(CtlPathsTest, ARegisteredDeviceIsExplainedOnTheProfileItSent) {
  const std::string jetson_profile =
      std::string(WEIGHTPATH_EXAMPLE_PROFILES_DIR) + "/../../tests/data/gpu-profiles/jetson-orin-r36.json";
  for (const auto& [device, profile] :
       std::vector<std::pair<std::string, std::string>>{{"rtx4090-01", ExampleProfilePath("rtx-4090")},
                                                        {"orin-01", jetson_profile}}) {
    ProcessResult resolved = Resolve({"--profile", profile, "--device-id", device, "-o", "json"});
    ASSERT_EQ(resolved.exit_code, 0) << resolved.err;
    ASSERT_THAT(resolved.out, HasSubstr("\"path_id\": \"bf16-"));
  }
  ASSERT_TRUE(Eventually([&] { return Registered("rtx4090-01") && Registered("orin-01"); }))
      << server_->Log();

  ProcessResult explain = Ctl({"explain", "rtx4090-01"});
  ASSERT_EQ(explain.exit_code, 0) << explain.err;
  EXPECT_THAT(explain.out,
              AllOf(HasSubstr("decision for device rtx4090-01"),
                    HasSubstr("evaluated on the hardware profile, priority and labels the device "
                              "sent (profile stored "),
                    HasSubstr("cuda-discrete-bf16 -> bf16-cuda: matched, chosen"),
                    HasSubstr("cuda-discrete-fp16 -> fp16-cuda: no match (supports_bf16)"),
                    Not(HasSubstr("registry holds no profile"))));
  ProcessResult json = Ctl({"explain", "rtx4090-01", "-o", "json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const v1::ExplainDecisionResponse explained = ParseExplain(json.out);
  EXPECT_TRUE(explained.evaluated().profile().supports_bf16());
  EXPECT_EQ(explained.evaluated().profile().gpu_name(), "NVIDIA GeForce RTX 4090");
  EXPECT_EQ(explained.evaluated().priority(), v1::PRIORITY_SPEED);
  EXPECT_EQ(explained.decision().weight_path().path_id(), "bf16-cuda");

  ProcessResult paths = Ctl({"paths", "rtx4090-01"});
  ASSERT_EQ(paths.exit_code, 0) << paths.err;
  EXPECT_THAT(paths.out,
              AllOf(HasSubstr("paths for device rtx4090-01 (cuda_discrete, CPU AMD EPYC 9654 "
                              "96-Core Processor), policy sha256:"),
                    HasSubstr("chosen (1 path)\n  bf16-cuda  for speed and fidelity\n")));
  ProcessResult paths_json = Ctl({"paths", "orin-01", "-o", "json"});
  ASSERT_EQ(paths_json.exit_code, 0) << paths_json.err;
  EXPECT_EQ(ByPath(ParseExplain(paths_json.out))["bf16-jetson"].standing(),
            v1::PathCandidate::STANDING_CHOSEN);

  ProcessResult gpu = Ctl({"device", "show", "rtx4090-01"});
  ASSERT_EQ(gpu.exit_code, 0) << gpu.err;
  EXPECT_THAT(gpu.out,
              AllOf(HasSubstr("hardware (as the device last sent it)\n  sent              20"),
                    HasSubstr("  cpus              192 logical, 96 physical\n"),
                    HasSubstr("  memory            256.0 GiB total, 240.0 GiB available\n"),
                    HasSubstr("  gpu               NVIDIA GeForce RTX 4090, 24.0 GiB, capability "
                              "8.9, 128 SMs\n"),
                    HasSubstr("  gpu dtypes        bf16, fp16\n"),
                    HasSubstr("  cpu flags         156 flags; notable: "),
                    Not(HasSubstr("  l4t "))));
  ProcessResult jetson = Ctl({"device", "show", "orin-01"});
  ASSERT_EQ(jetson.exit_code, 0) << jetson.err;
  EXPECT_THAT(jetson.out,
              AllOf(HasSubstr("  gpu               0: Orin, 59.9 GiB (55.9 GiB free), capability 8.7, "
                              "16 SMs, integrated, usable (visible to the engine)\n"),
                    HasSubstr("  gpu driver        - (CUDA 12.6)\n"),
                    HasSubstr("  l4t               36.4.3\n")));
}

// Devices name the reference part "Intel(R) Xeon(R) Platinum 8480+"; the
// bundled policy's figures name the 8480C and list the 8480+ among their
// cpu_model_aliases, so those reports are judged (before, every one was
// "not judged" and verification said "0 of 2 devices regressed"). Reports at
// another thread count have no figure, and are counted apart.
TEST_F(CtlPathsTest, VerificationJudgesTheReferencePartByItsAliasAndCountsTheRestApart) {
  const std::string profile = ExampleProfilePath("intel-sapphire-rapids");  // an 8480+
  const struct {
    const char* device;
    double decode;
    uint32_t threads;
  } reports[] = {{"plus-1", 40.0, 24}, {"plus-2", 85.0, 24}, {"plus-3", 30.0, 8}, {"plus-4", 31.0, 8}};
  for (const auto& report : reports) {
    ProcessResult resolved = Resolve({"--profile", profile, "--device-id", report.device, "-o", "json"});
    ASSERT_EQ(resolved.exit_code, 0) << resolved.err;
    v1::ReportMeasurementResponse answer;
    ASSERT_TRUE(Report(*device_stub_,
                       Measurement(absl::StrCat("m-", report.device), report.device, "w4a8-amx",
                                   report.decode, report.threads),
                       &answer)
                    .ok())
        << server_->Log();
    EXPECT_EQ(answer.regression(), report.decode == 40.0) << report.device;
  }
  ProcessResult table;
  ASSERT_TRUE(Eventually([&] {
    table = Ctl({"verification"});
    return table.out.find("1 of 4 devices regressed, 2 not judged") != std::string::npos;
  })) << table.out << table.err;
  ProcessResult json = Ctl({"verification", "-o", "json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  v1::GetVerificationMatrixResponse matrix;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json.out, &matrix).ok()) << json.out;
  // One cell for the part: the policy's 8480C figure is not listed again.
  std::vector<v1::VerificationCell> amx;
  for (const v1::VerificationCell& cell : matrix.cells()) {
    if (cell.path() == "w4a8-amx" && cell.hardware_class() == "x86_cpu") amx.push_back(cell);
  }
  ASSERT_EQ(amx.size(), 1u) << json.out;
  EXPECT_EQ(amx[0].cpu_model(), "Intel(R) Xeon(R) Platinum 8480+");
  EXPECT_EQ(amx[0].device_count(), 4u);
  EXPECT_EQ(amx[0].not_judged(), 2u);
  EXPECT_EQ(amx[0].regressions(), 1u);
}

// A policy change previewed against the registry: the bundled policy with
// AMX machines sent to tinygemm at speed too. The two 8480+ devices would
// move from w4a8-amx, the Zen 4 and the GPU would not; a document the
// server refuses names its file and line.
TEST_F(CtlPathsTest, PolicyPlanCountsTheRegisteredDevicesThatWouldMove) {
  RegisterFourDevices();
  if (HasFatalFailure()) return;
  const std::string bundled =
      ReadFileOrDie(std::string(WEIGHTPATH_EXAMPLE_PROFILES_DIR) + "/../../policy/default_policy.yaml");
  const std::string candidate = absl::StrReplaceAll(
      bundled, {{"      priority: [speed]\n    path: w4a8-amx\n",
                 "      priority: [speed]\n    path: w4a16-tinygemm-x86\n"}});
  ASSERT_NE(candidate, bundled);
  WriteFileOrDie(dir_.File("new.yaml"), candidate);

  ProcessResult plan = Ctl({"policy", "plan", "--policy", dir_.File("new.yaml")});
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  EXPECT_THAT(plan.out, AllOf(HasSubstr(" (served) -> sha256:"),
                              HasSubstr("4 devices evaluated: 2 unchanged, 2 would move\n"),
                              HasSubstr("amx-1, amx-2")));
  ProcessResult json = Ctl({"policy", "plan", "--policy", dir_.File("new.yaml"), "-o", "json",
                            "--examples", "1"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  v1::PlanPolicyResponse response;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json.out, &response).ok()) << json.out;
  ASSERT_EQ(response.moves_size(), 1) << json.out;
  EXPECT_EQ(response.moves(0).hardware_class(), "x86_cpu");
  EXPECT_EQ(response.moves(0).from_path(), "w4a8-amx");
  EXPECT_EQ(response.moves(0).to_path(), "w4a16-tinygemm");
  EXPECT_EQ(response.moves(0).devices(), 2u);
  EXPECT_THAT(response.moves(0).example_device_ids(), ElementsAre("amx-1"));
  EXPECT_EQ(response.devices_evaluated(), 4u);
  EXPECT_EQ(response.devices_unchanged(), 2u);
  EXPECT_NE(response.planned_policy_version(), response.current_policy_version());

  // The served policy itself: nothing moves.
  WriteFileOrDie(dir_.File("same.yaml"), bundled);
  ProcessResult same = Ctl({"policy", "plan", "--policy", dir_.File("same.yaml")});
  ASSERT_EQ(same.exit_code, 0) << same.err;
  EXPECT_THAT(same.out, HasSubstr("4 devices evaluated: 4 unchanged, 0 would move\n"));

  WriteFileOrDie(dir_.File("bad.yaml"),
                 absl::StrReplaceAll(bundled, {{"    path: w4a8-amx\n", "    path: w4a8-amz\n"}}));
  ProcessResult bad = Ctl({"policy", "plan", "--policy", dir_.File("bad.yaml")});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_THAT(bad.err, AllOf(HasSubstr("PlanPolicy: INVALID_ARGUMENT"), HasSubstr("bad.yaml:"),
                             HasSubstr("w4a8-amz")));
  ProcessResult recent =
      Ctl({"policy", "plan", "--policy", dir_.File("new.yaml"), "--since", "1h"});
  ASSERT_EQ(recent.exit_code, 0) << recent.err;
  EXPECT_THAT(recent.out, HasSubstr("4 devices evaluated: 2 unchanged, 2 would move\n"));
  EXPECT_EQ(Ctl({"policy", "plan", "--policy", dir_.File("new.yaml"), "--examples", "21"}).exit_code, 2);
  EXPECT_EQ(Ctl({"policy", "plan"}).exit_code, 2);
  EXPECT_EQ(Ctl({"policy", "plan", "--policy", dir_.File("absent.yaml")}).exit_code, 2);
  EXPECT_EQ(Ctl({"policy", "apply"}).exit_code, 2);
}

// A rollout previewed, recorded and made permanent, against the registry:
// the two 8480+ devices are pinned to tinygemm by a rollout of the x86
// class (the Zen 4 already runs it, the GPU is not selected).
//  - apply --dry-run writes nothing and counts the devices the rollout moves
//    at its first stage (those whose bucket is under 55%) and when complete;
//  - once COMPLETED, rollout delete is refused naming the count and --force;
//  - rollout promote --policy prints a document that policy plan shows
//    moving exactly those devices;
//  - apply --prune deletes only with --force the rollout whose file is
//    gone, and apply says when it would re-create a deleted id.
TEST_F(CtlPathsTest, RolloutDryRunDeletePruneAndPromoteCountTheDevicesTheyMove) {
  RegisterFourDevices();
  if (HasFatalFailure()) return;
  const std::string folder = dir_.File("rollouts");
  std::filesystem::create_directory(folder);
  const std::string rollout =
      "id: amx-tiny\n"
      "description: AMX machines onto tinygemm\n"
      "selector:\n"
      "  hardware_classes: [x86_cpu]\n"
      "action:\n"
      "  pin_path: w4a16-tinygemm-x86\n"
      "stages:\n"
      "  - percent: 55\n"
      "    min_bake_seconds: 3600\n"
      "    report_timeout_seconds: 3600\n"
      "  - percent: 100\n"
      "    min_bake_seconds: 3600\n"
      "    report_timeout_seconds: 3600\n";
  WriteFileOrDie(folder + "/a.yaml", rollout);
  std::vector<std::string> first_stage;
  for (const char* device : {"amx-1", "amx-2"}) {
    if (deploy::BucketWithinPercent(deploy::RolloutBucket("amx-tiny", device), 55)) {
      first_stage.push_back(device);
    }
  }
  ASSERT_THAT(first_stage, ElementsAre("amx-1"));  // buckets 5328 and 5882

  ProcessResult dry = Ctl({"apply", "-f", folder, "--dry-run"});
  ASSERT_EQ(dry.exit_code, 0) << dry.err;
  EXPECT_THAT(dry.out,
              AllOf(HasSubstr("rollout/amx-tiny would be created (" + folder + "/a.yaml)\n"),
                    HasSubstr(absl::StrCat("  at stage 1 of 2 (55%): ", first_stage.size(),
                                           " of 4 devices would move\n")),
                    HasSubstr("  when complete: 2 of 4 devices would move\n"),
                    HasSubstr("x86_cpu  w4a8-amx  w4a16-tinygemm  2        amx-1, amx-2"),
                    HasSubstr("dry run, nothing written: 1 rollout: 1 would be created")));
  EXPECT_THAT(Ctl({"rollout", "list"}).out, HasSubstr("no rollouts"));

  ASSERT_EQ(Ctl({"apply", "-f", folder}).exit_code, 0);
  // A new description moves nobody at the current stage; a new action is
  // refused as UpdateRollout would refuse it, still writing nothing.
  WriteFileOrDie(folder + "/a.yaml",
                 absl::StrReplaceAll(rollout, {{"AMX machines", "Sapphire Rapids"}}));
  ProcessResult update = Ctl({"apply", "-f", folder, "--dry-run"});
  ASSERT_EQ(update.exit_code, 0) << update.err;
  EXPECT_THAT(update.out, AllOf(HasSubstr("rollout/amx-tiny would be updated: description"),
                                HasSubstr("at stage 1 of 2 (55%): 0 of 4 devices would move"),
                                HasSubstr("when complete: " +
                                          std::to_string(2 - first_stage.size()) +
                                          " of 4 devices would move")));
  WriteFileOrDie(folder + "/a.yaml",
                 absl::StrReplaceAll(rollout, {{"w4a16-tinygemm-x86", "w4a8-amx"}}));
  ProcessResult refused = Ctl({"apply", "-f", folder, "--dry-run"});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_THAT(refused.err, AllOf(HasSubstr("rollout 'amx-tiny' would be updated in action"),
                                 HasSubstr("PlanRollout: FAILED_PRECONDITION")));
  WriteFileOrDie(folder + "/a.yaml", rollout);
  for (int stage = 0; stage < 2; ++stage) {
    ProcessResult advanced = Ctl({"rollout", "advance", "amx-tiny"});
    ASSERT_EQ(advanced.exit_code, 0) << advanced.err;
  }
  ASSERT_THAT(Ctl({"rollout", "status", "amx-tiny"}).out, HasSubstr("COMPLETED"));

  // Deleting the completed rollout would move both back: refused.
  ProcessResult kept = Ctl({"rollout", "delete", "amx-tiny"});
  EXPECT_EQ(kept.exit_code, 1);
  EXPECT_THAT(kept.err, AllOf(HasSubstr("DeleteRollout: FAILED_PRECONDITION"),
                              HasSubstr("would move 2 registered devices back"),
                              HasSubstr("set force (--force)")));

  // The promoted document moves the same devices, and nothing else.
  const std::string bundled =
      ReadFileOrDie(std::string(WEIGHTPATH_EXAMPLE_PROFILES_DIR) + "/../../policy/default_policy.yaml");
  WriteFileOrDie(dir_.File("served.yaml"), bundled);
  ProcessResult snippet = Ctl({"rollout", "promote", "amx-tiny"});
  ASSERT_EQ(snippet.exit_code, 0) << snippet.err;
  EXPECT_THAT(snippet.out, AllOf(HasSubstr("  - name: rollout-amx-tiny\n"),
                                 HasSubstr("hardware_class: [x86_cpu]"),
                                 HasSubstr("path: w4a16-tinygemm-x86"),
                                 HasSubstr("weightpathctl policy plan --policy FILE")));
  ProcessResult promoted = Ctl({"rollout", "promote", "amx-tiny", "--policy", dir_.File("served.yaml")});
  ASSERT_EQ(promoted.exit_code, 0) << promoted.err;
  WriteFileOrDie(dir_.File("promoted.yaml"), promoted.out);
  ProcessResult plan = Ctl({"policy", "plan", "--policy", dir_.File("promoted.yaml"), "-o", "json"});
  ASSERT_EQ(plan.exit_code, 0) << plan.err << promoted.out;
  v1::PlanPolicyResponse moves;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(plan.out, &moves).ok()) << plan.out;
  ASSERT_EQ(moves.moves_size(), 1) << plan.out;
  EXPECT_EQ(moves.moves(0).hardware_class(), "x86_cpu");
  EXPECT_EQ(moves.moves(0).from_path(), "w4a8-amx");
  EXPECT_EQ(moves.moves(0).to_path(), "w4a16-tinygemm");
  EXPECT_THAT(moves.moves(0).example_device_ids(), ElementsAre("amx-1", "amx-2"));

  // Its file gone, prune lists it and deletes it only with --force.
  std::filesystem::remove(folder + "/a.yaml");
  WriteFileOrDie(folder + "/b.yaml",
                 "id: gpu-fidelity\nselector: {hardware_classes: [cuda_discrete]}\n"
                 "action: {set_priority: PRIORITY_FIDELITY}\n"
                 "stages: [{percent: 100, min_bake_seconds: 3600, report_timeout_seconds: 3600}]\n");
  ProcessResult prune_dry = Ctl({"apply", "-f", folder, "--prune", "--dry-run"});
  EXPECT_EQ(prune_dry.exit_code, 1);
  EXPECT_THAT(prune_dry.out,
              AllOf(HasSubstr("rollout/amx-tiny (COMPLETED, no file in " + folder +
                              " declares it) would not be pruned without --force: deleting it "
                              "would move 2 of 4 devices back"),
                    HasSubstr("rollout/gpu-fidelity would be created"),
                    HasSubstr("0 would be pruned")));
  ProcessResult prune = Ctl({"apply", "-f", folder, "--prune"});
  EXPECT_EQ(prune.exit_code, 1);
  EXPECT_THAT(prune.out, AllOf(HasSubstr("rollout/amx-tiny (COMPLETED, no file in " + folder +
                                         " declares it) not pruned: "),
                               HasSubstr("not pruned: amx-tiny"),
                               HasSubstr("rollout/gpu-fidelity created")));
  ProcessResult forced = Ctl({"apply", "-f", folder, "--prune", "--force"});
  ASSERT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_THAT(forced.out, AllOf(HasSubstr("deleted (pruned): 2 of 4 devices moved back"),
                                HasSubstr("rollout/gpu-fidelity unchanged"),
                                HasSubstr("; 1 pruned\n")));
  EXPECT_THAT(Ctl({"rollout", "list"}).out, Not(HasSubstr("amx-tiny")));

  // Its file back, apply says the id was deleted before re-creating it.
  WriteFileOrDie(folder + "/a.yaml", rollout);
  ProcessResult again = Ctl({"apply", "-f", folder, "--dry-run"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_THAT(again.out, AllOf(HasSubstr("rollout/amx-tiny would be created"),
                               HasSubstr("re-created: 'amx-tiny' was deleted at "),
                               HasSubstr("by admin")));

  // A deletion that moves nobody needs no --force, and says so.
  ASSERT_EQ(Ctl({"rollout", "abort", "gpu-fidelity"}).exit_code, 0);
  ProcessResult gone = Ctl({"rollout", "delete", "gpu-fidelity"});
  ASSERT_EQ(gone.exit_code, 0) << gone.err;
  EXPECT_THAT(gone.out, HasSubstr("no device moves back: an ABORTED rollout shapes no decision"));

  // Bad input names the flag or the field.
  ProcessResult file_prune = Ctl({"apply", "-f", folder + "/a.yaml", "--prune"});
  EXPECT_EQ(file_prune.exit_code, 2);
  EXPECT_THAT(file_prune.err, HasSubstr("--prune needs -f DIR"));
  ProcessResult lone_force = Ctl({"apply", "-f", folder, "--force"});
  EXPECT_EQ(lone_force.exit_code, 2);
  EXPECT_THAT(lone_force.err, HasSubstr("--force applies to --prune only"));
  EXPECT_EQ(Ctl({"rollout", "promote"}).exit_code, 2);
  EXPECT_EQ(Ctl({"rollout", "promote", "amx-tiny", "-o", "json"}).exit_code, 2);
  ProcessResult absent = Ctl({"rollout", "promote", "amx-tiny", "--policy", dir_.File("absent.yaml")});
  EXPECT_EQ(absent.exit_code, 2);
  EXPECT_THAT(absent.err, HasSubstr("absent.yaml"));
  ASSERT_EQ(Ctl({"apply", "-f", folder}).exit_code, 0);
  ProcessResult priority = Ctl({"rollout", "promote", "gpu-fidelity"});
  EXPECT_EQ(priority.exit_code, 2);
  EXPECT_THAT(priority.err, HasSubstr("--policy FILE (the served policy document) is required"));
  ProcessResult copied =
      Ctl({"rollout", "promote", "gpu-fidelity", "--policy", dir_.File("served.yaml")});
  ASSERT_EQ(copied.exit_code, 0) << copied.err;
  EXPECT_THAT(copied.out, HasSubstr("- name: rollout-gpu-fidelity-cuda-discrete-bf16"));
}

TEST_F(CtlPathsTest, BadInputIsAUsageErrorAndAServerRefusalNamesItsCode) {
  ProcessResult none = RunProcess({WEIGHTPATHCTL_PATH, "paths"});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_THAT(none.err, HasSubstr("usage: weightpathctl paths DEVICE_ID"));
  ProcessResult no_profile = Ctl({"paths", "--model", "Spark-X2.5-1.7B"});
  EXPECT_EQ(no_profile.exit_code, 2);
  EXPECT_THAT(no_profile.err, HasSubstr("needs DEVICE_ID or --profile FILE"));
  ProcessResult missing = Ctl({"paths", "--profile", dir_.File("absent.json")});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_THAT(missing.err, HasSubstr("absent.json"));
  ProcessResult output = Ctl({"paths", "--profile", ExampleProfilePath("amd-zen4"), "-o", "xml"});
  EXPECT_EQ(output.exit_code, 2);
  EXPECT_THAT(output.err, HasSubstr("-o/--output 'xml'"));
  ProcessResult labels = Ctl({"paths", "--profile", ExampleProfilePath("amd-zen4"), "--labels", "x"});
  EXPECT_EQ(labels.exit_code, 2);
  // The same arguments as explain: --priority is taken (the head's
  // decision), and a device id refuses the flags that describe a profile.
  ProcessResult priority =
      Ctl({"paths", "--profile", ExampleProfilePath("amd-zen4"), "--priority", "fidelity"});
  EXPECT_EQ(priority.exit_code, 0) << priority.err;
  ProcessResult device_and_labels = Ctl({"paths", "some-device", "--labels", "a=b"});
  EXPECT_EQ(device_and_labels.exit_code, 2);
  EXPECT_THAT(device_and_labels.err, HasSubstr("--labels applies to --profile only"));
  ProcessResult both = Ctl({"paths", "some-device", "--profile", ExampleProfilePath("amd-zen4")});
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_THAT(both.err, HasSubstr("give DEVICE_ID or --profile FILE, not both"));
  ProcessResult unknown = Ctl({"paths", "no-such-device"});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_THAT(unknown.err, HasSubstr("NOT_FOUND"));

  // The model is the server's to know: NOT_FOUND from ExplainDecision.
  ProcessResult model =
      Ctl({"paths", "--profile", ExampleProfilePath("amd-zen4"), "--model", "no-such-model"});
  EXPECT_EQ(model.exit_code, 1);
  EXPECT_THAT(model.err, HasSubstr("ExplainDecision: NOT_FOUND: model \"no-such-model\""));
  // A token the server does not know is refused.
  WriteSecretFileOrDie(dir_.File("wrong-token"), "not-an-operator\n");
  ProcessResult stranger = RunProcess(
      {WEIGHTPATHCTL_PATH, "paths", "--profile", ExampleProfilePath("amd-zen4"),
       "--server=" + server_->grpc_address(), "--token-file=" + dir_.File("wrong-token")});
  EXPECT_EQ(stranger.exit_code, 1) << stranger.err;
  EXPECT_THAT(stranger.err, HasSubstr("ExplainDecision: PERMISSION_DENIED"));
}

TEST_F(CtlPathsTest, AResolveWithoutADeviceIdIsADryRunAndAddsNoDevice) {
  const std::string profile = ExampleProfilePath("amd-zen4");
  ProcessResult dry = Resolve({"--profile", profile, "-o", "json"});
  ASSERT_EQ(dry.exit_code, 0) << dry.err;
  ProcessResult named_dry =
      Resolve({"--profile", profile, "--device-id", "lab-box-2", "--dry-run", "-o", "json"});
  ASSERT_EQ(named_dry.exit_code, 0) << named_dry.err;
  EXPECT_EQ(named_dry.out, dry.out) << "a dry run is answered as any resolve";
  ProcessResult named = Resolve({"--profile", profile, "--device-id", "lab-box-1", "-o", "json"});
  ASSERT_EQ(named.exit_code, 0) << named.err;
  EXPECT_EQ(named.out, dry.out);

  ASSERT_TRUE(Eventually([&] { return Registered("lab-box-1"); })) << server_->Log();
  ProcessResult devices = Ctl({"devices"});
  ASSERT_EQ(devices.exit_code, 0) << devices.err;
  EXPECT_THAT(devices.out, AllOf(HasSubstr("lab-box-1"), Not(HasSubstr("weightpathctl")),
                                 Not(HasSubstr("lab-box-2"))));
  ProcessResult summary = Ctl({"summary", "-o", "json"});
  ASSERT_EQ(summary.exit_code, 0) << summary.err;
  EXPECT_THAT(summary.out, HasSubstr("\"total_devices\": \"1\""));

  ProcessResult offline = RunProcess(
      {WEIGHTPATHCTL_PATH, "resolve", "--offline", "--dry-run", "--profile", profile});
  EXPECT_EQ(offline.exit_code, 2);
  EXPECT_THAT(offline.err, HasSubstr("--dry-run applies to a server's resolve"));
  ProcessResult help = RunProcess({WEIGHTPATHCTL_PATH, "resolve", "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_THAT(help.out, AllOf(HasSubstr("--dry-run"),
                              HasSubstr("a resolve without --device-id is a dry run")));
}

}  // namespace
}  // namespace weightpath::server::testing
