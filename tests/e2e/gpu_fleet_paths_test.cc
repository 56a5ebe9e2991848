// examples/policies/gpu-fleet.yaml served by the real weightpath-server with
// a catalog that carries model facts, asked through the real weightpathctl:
// each captured GPU machine (tests/data/gpu-profiles) resolves to its path
// with the engine arguments the policy derives for it and the model, and
// `paths` / `explain` show NVIDIA NIM's three groups.
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/server/server_process.h"
#include "tests/support/subprocess.h"
#include "weightpath/v1/rollout.pb.h"
#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::server::testing {
namespace {

using ::testing::AllOf;
using ::testing::DoubleNear;
using ::testing::HasSubstr;
using ::testing::Not;
using weightpath::testing::ProcessResult;
using weightpath::testing::RunProcess;

constexpr char kToken[] = "gpu-fleet-operator-token-0123456789";

std::string SourceFile(const std::string& relative) {
  return std::string(WEIGHTPATH_SOURCE_DIR) + "/" + relative;
}
std::string GpuProfile(const std::string& name) {
  return SourceFile("tests/data/gpu-profiles/" + name + ".json");
}

// Every build name gpu-fleet.yaml can return, for the three models whose
// facts tests/data/gpu-profiles/models.yaml gives; the facts appended as the
// catalog's own `model_facts`.
std::string GpuFleetCatalog() {
  std::string text = "default_model: Llama-3.1-8B\nmodels:\n";
  for (const char* model : {"Llama-3.1-8B", "Llama-3.1-70B", "Synthetic-12-heads"}) {
    absl::StrAppend(&text, "  ", model, ":\n");
    for (const char* build : {"fp8-w8a8", "w4a16-marlin", "bf16", "fp16", "export-qnn-w8a16",
                              "w4a16-tinygemm", "w4a8-amx"}) {
      absl::StrAppend(&text, "    ", build, ": {uri: https://mirror.example/", model, "/", build,
                      ".bin, sha256: ", std::string(64, 'a'), ", size_bytes: 1}\n");
    }
  }
  return text + ReadFileOrDie(SourceFile("tests/data/gpu-profiles/models.yaml"));
}

double Number(const google::protobuf::Struct& kwargs, const std::string& name) {
  const auto it = kwargs.fields().find(name);
  EXPECT_NE(it, kwargs.fields().end()) << name << " missing from " << kwargs.DebugString();
  return it == kwargs.fields().end() ? -1 : it->second.number_value();
}
std::string Text(const google::protobuf::Struct& kwargs, const std::string& name) {
  const auto it = kwargs.fields().find(name);
  EXPECT_NE(it, kwargs.fields().end()) << name << " missing from " << kwargs.DebugString();
  return it == kwargs.fields().end() ? "" : it->second.string_value();
}

template <typename Message>
Message ParseJson(const std::string& json) {
  Message message;
  const auto parsed = google::protobuf::util::JsonStringToMessage(json, &message);
  EXPECT_TRUE(parsed.ok()) << parsed.ToString() << "\n" << json;
  return message;
}

std::map<std::string, v1::PathCandidate> ByPath(const v1::ExplainDecisionResponse& response) {
  std::map<std::string, v1::PathCandidate> paths;
  for (const v1::PathCandidate& path : response.paths()) paths.emplace(path.path(), path);
  return paths;
}

class GpuFleetPathsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteSecretFileOrDie(dir_.File("token"), std::string(kToken) + "\n");
    WriteFileOrDie(dir_.File("catalog.yaml"), GpuFleetCatalog());
    auto started = ServerProcess::Start(
        {"--policy=" + SourceFile("examples/policies/gpu-fleet.yaml"),
         "--catalog=" + dir_.File("catalog.yaml"), "--admin_token_file=" + dir_.File("token")});
    ASSERT_TRUE(started.ok()) << started.status();
    server_ = *std::move(started);
  }

  ProcessResult Ctl(std::vector<std::string> args) {
    std::vector<std::string> argv = {WEIGHTPATHCTL_PATH};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.push_back("--server=" + server_->grpc_address());
    argv.push_back("--token-file=" + dir_.File("token"));
    return RunProcess(argv);
  }

  // A device's resolve, as weightpathctl makes it for a profile file.
  v1::ResolveWeightPathResponse Resolve(const std::string& profile, const std::string& model,
                                        const std::string& priority = "speed") {
    ProcessResult resolved =
        RunProcess({WEIGHTPATHCTL_PATH, "resolve", "--profile", GpuProfile(profile), "--model",
                    model, "--priority", priority, "--device-id", "gpu-" + profile, "-o", "json",
                    "--server=" + server_->grpc_address()});
    EXPECT_EQ(resolved.exit_code, 0) << resolved.err << server_->Log();
    return ParseJson<v1::ResolveWeightPathResponse>(resolved.out);
  }

  v1::ExplainDecisionResponse Paths(const std::string& profile_file, const std::string& model) {
    ProcessResult json = Ctl({"paths", "--profile", profile_file, "--model", model, "-o", "json"});
    EXPECT_EQ(json.exit_code, 0) << json.err;
    return ParseJson<v1::ExplainDecisionResponse>(json.out);
  }

  TempDir dir_;
  std::unique_ptr<ServerProcess> server_;
};

TEST_F(GpuFleetPathsTest, EachCapturedMachineResolvesToItsPathWithTheDerivedEngineArguments) {
  // H200 (capability 9.0, 141 GB): fp8 W8A8 on one GPU with the model's
  // whole context; the budget is the free share less the 0.05 reserve.
  const v1::ResolveWeightPathResponse h200 = Resolve("h200", "Llama-3.1-8B");
  EXPECT_EQ(h200.weight_path().path_id(), "fp8-w8a8-cuda");
  EXPECT_EQ(Text(h200.engine_kwargs(), "quantization"), "fp8");
  EXPECT_EQ(Number(h200.engine_kwargs(), "tensor_parallel_size"), 1);
  EXPECT_EQ(Text(h200.engine_kwargs(), "dtype"), "bfloat16");
  EXPECT_EQ(Text(h200.engine_kwargs(), "kv_cache_dtype"), "fp8");
  EXPECT_EQ(Number(h200.engine_kwargs(), "max_model_len"), 131072);
  EXPECT_THAT(Number(h200.engine_kwargs(), "gpu_memory_utilization"),
              DoubleNear(149557313536.0 / 150109716480.0 - 0.05, 1e-12));
  // Fidelity keeps the model dtype: no quantization, the same derivations.
  const v1::ResolveWeightPathResponse h200_fidelity = Resolve("h200", "Llama-3.1-8B", "fidelity");
  EXPECT_EQ(h200_fidelity.weight_path().path_id(), "bf16-cuda");
  EXPECT_EQ(h200_fidelity.engine_kwargs().fields().count("quantization"), 0u);
  EXPECT_EQ(Text(h200_fidelity.engine_kwargs(), "dtype"), "bfloat16");

  // 8xH100: the 70B model across all eight (64 heads); a 12-head model
  // across the six that divide its heads.
  const v1::ResolveWeightPathResponse dgx = Resolve("dgx-8xh100", "Llama-3.1-70B");
  EXPECT_EQ(dgx.weight_path().path_id(), "fp8-w8a8-cuda");
  EXPECT_EQ(Number(dgx.engine_kwargs(), "tensor_parallel_size"), 8);
  EXPECT_EQ(Number(Resolve("dgx-8xh100", "Synthetic-12-heads").engine_kwargs(),
                   "tensor_parallel_size"),
            6);

  // A100 MIG 3g.40gb: Marlin int4 (8.0), one slice, sized by the slice.
  const v1::ResolveWeightPathResponse mig = Resolve("a100-mig-2x3g40gb", "Llama-3.1-8B");
  EXPECT_EQ(mig.weight_path().path_id(), "w4a16-marlin-cuda");
  EXPECT_EQ(Text(mig.engine_kwargs(), "quantization"), "gptq_marlin");
  EXPECT_EQ(Number(mig.engine_kwargs(), "tensor_parallel_size"), 1);
  EXPECT_THAT(Number(mig.engine_kwargs(), "gpu_memory_utilization"),
              DoubleNear(30000000000.0 / 42144366592.0 - 0.05, 1e-12));

  // Jetson Orin on L4T R36: Marlin int4 on its integrated GPU.
  const v1::ResolveWeightPathResponse orin = Resolve("jetson-orin-r36", "Llama-3.1-8B");
  EXPECT_EQ(orin.weight_path().path_id(), "w4a16-marlin-jetson");
  EXPECT_EQ(Text(orin.engine_kwargs(), "quantization"), "gptq_marlin");
  EXPECT_EQ(Number(orin.engine_kwargs(), "tensor_parallel_size"), 1);

  // RTX 4090 at 90% in use: fp8 by capability, and no context fits the
  // 5% left, so max_model_len is left out rather than sent as 0.
  const v1::ResolveWeightPathResponse busy = Resolve("rtx4090-busy", "Llama-3.1-8B");
  EXPECT_EQ(busy.weight_path().path_id(), "fp8-w8a8-cuda");
  EXPECT_EQ(busy.engine_kwargs().fields().count("max_model_len"), 0u);
  EXPECT_THAT(Number(busy.engine_kwargs(), "gpu_memory_utilization"), DoubleNear(0.05, 1e-12));
}

TEST_F(GpuFleetPathsTest, AnUnchangedDeviceKeepsItsEtagAndAChangedOneGetsNewArguments) {
  // The decided part is built per call for a path that derives engine
  // arguments: the same profile must still give the same etag.
  const v1::ResolveWeightPathResponse first = Resolve("h200", "Llama-3.1-8B");
  const v1::ResolveWeightPathResponse second = Resolve("h200", "Llama-3.1-8B");
  EXPECT_FALSE(first.decision_etag().empty());
  EXPECT_EQ(first.decision_etag(), second.decision_etag());
  // The same device with 100 GB free instead of 149.6 GB: a smaller
  // gpu_memory_utilization, so another decision.
  const std::string busier = dir_.File("h200-busier.json");
  std::string text = ReadFileOrDie(GpuProfile("h200"));
  text.replace(text.find("149557313536"), 12, "100000000000");
  WriteFileOrDie(busier, text);
  ProcessResult resolved =
      RunProcess({WEIGHTPATHCTL_PATH, "resolve", "--profile", busier, "--model", "Llama-3.1-8B",
                  "--device-id", "gpu-h200", "-o", "json", "--server=" + server_->grpc_address()});
  ASSERT_EQ(resolved.exit_code, 0) << resolved.err;
  const auto changed = ParseJson<v1::ResolveWeightPathResponse>(resolved.out);
  EXPECT_THAT(Number(changed.engine_kwargs(), "gpu_memory_utilization"),
              DoubleNear(100000000000.0 / 150109716480.0 - 0.05, 1e-12));
  EXPECT_NE(changed.decision_etag(), first.decision_etag());
  // Another model on the same machine: another decision too.
  EXPECT_NE(Resolve("h200", "Llama-3.1-70B").decision_etag(), first.decision_etag());
}

TEST_F(GpuFleetPathsTest, PathsShowsTheThreeGroupsWithMemoryContextAndTheFailingRequirement) {
  // The idle RTX 4090 (examples/profiles: free memory unknown, read as all
  // free): fp8 runs with the whole context; bf16's weights fit but the full
  // 128k context does not: low on memory, with what it needs and what fits.
  const std::string rtx = SourceFile("examples/profiles/rtx-4090.json");
  const v1::ExplainDecisionResponse response = Paths(rtx, "Llama-3.1-8B");
  std::map<std::string, v1::PathCandidate> paths = ByPath(response);
  EXPECT_EQ(paths["fp8-w8a8-cuda"].fit(), v1::PathCandidate::FIT_RUNNABLE);
  EXPECT_EQ(Text(paths["fp8-w8a8-cuda"].engine_kwargs(), "quantization"), "fp8");
  const v1::PathCandidate& bf16 = paths["bf16-cuda"];
  EXPECT_EQ(bf16.standing(), v1::PathCandidate::STANDING_CHOSEN);  // at fidelity
  EXPECT_EQ(bf16.fit(), v1::PathCandidate::FIT_LOW_MEMORY);
  EXPECT_EQ(bf16.failing_requirement(), "requires.memory_per_gpu");
  // 16.06 GB of weights + 1 GiB + 128 KiB of KV cache per token x 131072.
  EXPECT_EQ(bf16.memory_per_gpu_bytes(), 34314133504u);
  EXPECT_EQ(bf16.max_model_len(), 55962u);
  EXPECT_EQ(Number(bf16.engine_kwargs(), "max_model_len"), 55962);
  // The CPU paths cannot run on it: a rule's hardware condition.
  EXPECT_EQ(paths["w4a8-amx"].fit(), v1::PathCandidate::FIT_INCOMPATIBLE);
  EXPECT_EQ(paths["w4a8-amx"].failing_requirement(), "match");

  ProcessResult table = Ctl({"paths", "--profile", rtx, "--model", "Llama-3.1-8B"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out,
              AllOf(HasSubstr("by fit for model Llama-3.1-8B, as NVIDIA NIM groups them\n"
                              "runnable ("),
                    HasSubstr("low on memory (1 path)\n  bf16-cuda"),
                    HasSubstr("needs 32.0 GiB per GPU of 22.8 GiB; a context of 55962 tokens "
                              "fits\n"),
                    HasSubstr("    fit         low on memory: requires.memory_per_gpu: the "
                              "model's full context needs 32.0 GiB per GPU"),
                    HasSubstr("    engine      dtype=bfloat16 gpu_memory_utilization=0.95 "
                              "kv_cache_dtype=auto max_model_len=55962 tensor_parallel_size=1\n"),
                    HasSubstr("incompatible (")));

  // The busy 4090: the chosen fp8 path's weights do not fit what is free.
  std::map<std::string, v1::PathCandidate> busy = ByPath(Paths(GpuProfile("rtx4090-busy"),
                                                               "Llama-3.1-8B"));
  EXPECT_EQ(busy["fp8-w8a8-cuda"].standing(), v1::PathCandidate::STANDING_CHOSEN);
  EXPECT_EQ(busy["fp8-w8a8-cuda"].fit(), v1::PathCandidate::FIT_INCOMPATIBLE);
  EXPECT_EQ(busy["fp8-w8a8-cuda"].failing_requirement(), "requires.weights_per_gpu");
  EXPECT_THAT(busy["fp8-w8a8-cuda"].fit_reason(),
              HasSubstr("the weights need 7.5 GiB per GPU; the budget is 1.2 GiB"));

  // A 40 GB MIG slice and the 70B model: Marlin is chosen by the rules and
  // cannot hold the weights; fp8 fails its capability requirement (and its
  // rule's condition) before memory is asked.
  std::map<std::string, v1::PathCandidate> mig =
      ByPath(Paths(GpuProfile("a100-mig-2x3g40gb"), "Llama-3.1-70B"));
  EXPECT_EQ(mig["w4a16-marlin-cuda"].fit(), v1::PathCandidate::FIT_INCOMPATIBLE);
  EXPECT_EQ(mig["w4a16-marlin-cuda"].failing_requirement(), "requires.weights_per_gpu");
  EXPECT_EQ(mig["fp8-w8a8-cuda"].fit(), v1::PathCandidate::FIT_INCOMPATIBLE);
  EXPECT_EQ(mig["fp8-w8a8-cuda"].failing_requirement(), "requires.gpu_capability");
  EXPECT_THAT(mig["fp8-w8a8-cuda"].reason(), HasSubstr("gpu_capability at least 8.9"));

  // 8xH100 and the 70B model: fp8 on eight GPUs runs.
  std::map<std::string, v1::PathCandidate> dgx =
      ByPath(Paths(GpuProfile("dgx-8xh100"), "Llama-3.1-70B"));
  EXPECT_EQ(dgx["fp8-w8a8-cuda"].fit(), v1::PathCandidate::FIT_RUNNABLE);
  EXPECT_EQ(Number(dgx["fp8-w8a8-cuda"].engine_kwargs(), "tensor_parallel_size"), 8);

  ProcessResult yaml =
      Ctl({"paths", "--profile", GpuProfile("rtx4090-busy"), "--model", "Llama-3.1-8B", "-o",
           "yaml"});
  ASSERT_EQ(yaml.exit_code, 0) << yaml.err;
  EXPECT_THAT(yaml.out, AllOf(HasSubstr("fit: \"FIT_INCOMPATIBLE\""),
                              HasSubstr("failing_requirement: \"requires.weights_per_gpu\"")));
}

TEST_F(GpuFleetPathsTest, ExplainShowsTheDecisionsFitEngineArgumentsAndTheGroups) {
  ProcessResult table = Ctl({"explain", "--profile", GpuProfile("dgx-8xh100"), "--model",
                             "Llama-3.1-70B"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out,
              AllOf(HasSubstr("  fit               runnable\n"),
                    HasSubstr("  engine args       dtype=bfloat16 gpu_memory_utilization="),
                    HasSubstr("quantization=fp8 tensor_parallel_size=8\n"),
                    HasSubstr("paths for model Llama-3.1-70B, as NVIDIA NIM groups them\n"
                              "  runnable ("),
                    Not(HasSubstr("not judged"))));
  // The catalog's default model when none is asked for.
  ProcessResult json = Ctl({"explain", "--profile", GpuProfile("h200"), "-o", "json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const v1::ExplainDecisionResponse response = ParseJson<v1::ExplainDecisionResponse>(json.out);
  EXPECT_EQ(response.decision().model(), "Llama-3.1-8B");
  EXPECT_EQ(Number(response.decision().engine_kwargs(), "max_model_len"), 131072);
}

}  // namespace
}  // namespace weightpath::server::testing
