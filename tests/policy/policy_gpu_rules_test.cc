// GPU rules, the expression language and the engine arguments a policy
// derives (policy/gpu_facts.h, expression.h, engine_args.h), on the GPU
// machines the probe has met (tests/data/gpu-profiles, the figures of
// tests/probe/fake_nvidia/fake_machines.h) and
// examples/policies/gpu-fleet.yaml.
#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "policy/engine_args.h"
#include "policy/gpu_facts.h"
#include "policy/model_facts.h"
#include "policy/path_standing.h"
#include "policy/policy.h"
#include "policy/profile_json.h"
#include "tests/testing/status_matchers.h"

namespace weightpath::policy {
namespace {

using ::testing::DoubleNear;
using ::testing::HasSubstr;
using ::weightpath::testing::IsOk;
using ::weightpath::testing::StatusIs;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

v1::HardwareProfile ProfileAt(const std::string& path) {
  absl::StatusOr<v1::HardwareProfile> profile = ParseProfileJson(ReadFile(path), path);
  EXPECT_THAT(profile, IsOk()) << path;
  return profile.ok() ? *profile : v1::HardwareProfile();
}

v1::HardwareProfile GpuProfile(const std::string& name) {
  return ProfileAt(std::string(WEIGHTPATH_GPU_PROFILES_DIR) + "/" + name + ".json");
}

v1::HardwareProfile ExampleProfile(const std::string& name) {
  return ProfileAt(std::string(WEIGHTPATH_EXAMPLE_PROFILES_DIR) + "/" + name + ".json");
}

ModelFacts Model(const std::string& name) {
  const std::string path = std::string(WEIGHTPATH_GPU_PROFILES_DIR) + "/models.yaml";
  auto facts = ParseModelFactsDocument(ReadFile(path), path);
  EXPECT_THAT(facts, IsOk());
  if (!facts.ok() || facts->count(name) == 0) {
    ADD_FAILURE() << "no facts for " << name;
    return {};
  }
  return facts->at(name);
}

std::shared_ptr<const Policy> GpuFleet() {
  const std::string path = WEIGHTPATH_GPU_FLEET_POLICY;
  auto policy = LoadPolicy(ReadFile(path), path);
  EXPECT_THAT(policy, IsOk());
  return policy.ok() ? *policy : DefaultPolicy();
}

std::string Decide(const Policy& policy, const v1::HardwareProfile& profile,
                   v1::Priority priority = v1::PRIORITY_SPEED) {
  auto decision = Evaluate(policy, profile, priority, Labels());
  if (!decision.ok()) return std::string(decision.status().message());
  return decision->path->id;
}

google::protobuf::Struct Kwargs(const Policy& policy, const v1::HardwareProfile& profile,
                                const ModelFacts& model,
                                v1::Priority priority = v1::PRIORITY_SPEED) {
  google::protobuf::Struct kwargs;
  auto decision = Evaluate(policy, profile, priority, Labels());
  EXPECT_THAT(decision, IsOk());
  if (decision.ok()) FillEngineKwargs(*decision->path, profile, model, &kwargs);
  return kwargs;
}

double Number(const google::protobuf::Struct& kwargs, const std::string& name) {
  auto found = kwargs.fields().find(name);
  if (found == kwargs.fields().end()) {
    ADD_FAILURE() << name << " missing";
    return -1;
  }
  return found->second.number_value();
}

std::string Text(const google::protobuf::Struct& kwargs, const std::string& name) {
  auto found = kwargs.fields().find(name);
  return found == kwargs.fields().end() ? "<missing>" : found->second.string_value();
}

std::map<std::string, PathStanding> Standings(const Policy& policy,
                                              const v1::HardwareProfile& profile,
                                              const ModelFacts& model) {
  auto standings = JudgePaths(policy, profile, Labels(), model);
  EXPECT_THAT(standings, IsOk());
  std::map<std::string, PathStanding> by_id;
  if (standings.ok()) {
    for (PathStanding& standing : *standings) by_id[standing.path->id] = std::move(standing);
  }
  return by_id;
}

// --- GPU facts --------------------------------------------------------------

TEST(PolicyGpuFactsTest, EachMachineAsTheEngineSeesIt) {
  const GpuFacts h200 = GpuFactsOf(GpuProfile("h200"));
  EXPECT_EQ(h200.count, 1u);
  EXPECT_EQ(h200.capability_tenths, 90u);
  EXPECT_EQ(h200.memory_total_bytes, 150109716480u);
  EXPECT_EQ(h200.memory_free_bytes, 149557313536u);

  const GpuFacts dgx = GpuFactsOf(GpuProfile("dgx-8xh100"));
  EXPECT_EQ(dgx.count, 8u);
  EXPECT_EQ(dgx.identical_count, 8u);

  // Each MIG slice is a device of its own 40 GB, never the parent's 80 GB;
  // the busier slice sets the free memory of the pair.
  const GpuFacts mig = GpuFactsOf(GpuProfile("a100-mig-2x3g40gb"));
  EXPECT_TRUE(mig.mig);
  EXPECT_EQ(mig.count, 2u);
  EXPECT_EQ(mig.identical_count, 2u);
  EXPECT_EQ(mig.memory_total_bytes, 42144366592u);
  EXPECT_EQ(mig.memory_free_bytes, 30000000000u);
  EXPECT_EQ(mig.capability_tenths, 80u);

  const GpuFacts orin = GpuFactsOf(GpuProfile("jetson-orin-r36"));
  EXPECT_EQ(orin.l4t_major, 36u);
  EXPECT_TRUE(orin.integrated);
  EXPECT_EQ(orin.capability_tenths, 87u);

  // A profile of an older probe (no gpus list): one device from gpu_*.
  const GpuFacts legacy = GpuFactsOf(ExampleProfile("rtx-4090"));
  EXPECT_EQ(legacy.count, 1u);
  EXPECT_EQ(legacy.capability_tenths, 89u);
  EXPECT_FALSE(legacy.memory_free_known);
}

TEST(PolicyGpuFactsTest, HiddenGpusAreNotCounted) {
  v1::HardwareProfile profile = GpuProfile("dgx-8xh100");
  for (int i = 4; i < 8; ++i) profile.mutable_gpus(i)->set_usable(false);
  profile.mutable_gpus(0)->set_memory_free_bytes(1);
  const GpuFacts facts = GpuFactsOf(profile);
  EXPECT_EQ(facts.count, 4u);
  EXPECT_EQ(facts.identical_count, 4u);
  EXPECT_EQ(facts.memory_free_bytes, 1u);
}

// --- The expression language -------------------------------------------------

ExpressionInputs H200Inputs(const ModelFacts& model = {}) {
  const v1::HardwareProfile profile = GpuProfile("h200");
  return InputsFor(profile, GpuFactsOf(profile), model);
}

TEST(PolicyExpressionTest, EvaluatesArithmeticFunctionsAndFacts) {
  const ExpressionScope scope;
  auto expect = [&](const std::string& text, double value) {
    auto expression = Expression::Compile(text, scope);
    ASSERT_THAT(expression, IsOk()) << text;
    const ExprValue result = expression->Evaluate(H200Inputs(Model("Llama-3.1-8B")));
    EXPECT_TRUE(result.known) << text;
    EXPECT_DOUBLE_EQ(result.number, value) << text;
  };
  expect("1 + 2 * 3", 7);
  expect("(1 + 2) * 3", 9);
  expect("-4 / 2", -2);
  expect("2 * GiB", 2147483648.0);
  expect("gpu.capability", 9.0);
  expect("if(gpu.capability >= 8.9, 1, 0)", 1);
  expect("min(3, 1, 2) + max(3, 1, 2)", 4);
  expect("floor(2.7) + ceil(2.2)", 5);
  expect("clamp(7, 0, 5)", 5);
  expect("largest_divisor(12, 8)", 6);
  expect("largest_divisor(64, 8)", 8);
  expect("largest_divisor(7, 0)", 1);
  expect("largest_divisor(model.attention_heads, gpu.identical_count)", 1);
  expect("if(not gpu.mig and gpu.count == 1 or false, 10, 20)", 10);
}

TEST(PolicyExpressionTest, StringsCompareByText) {
  auto expression = Expression::Compile("if(profile.supports_bf16, 'bfloat16', 'float16')", {});
  ASSERT_THAT(expression, IsOk());
  const ExprValue value = expression->Evaluate(H200Inputs());
  ASSERT_EQ(value.type, ValueType::kString);
  EXPECT_EQ(*value.text, "bfloat16");
  EXPECT_EQ(expression->range().strings.size(), 2u);
}

TEST(PolicyExpressionTest, AMissingModelFactMakesTheResultUnknown) {
  auto expression = Expression::Compile("model.layers * 2", {});
  ASSERT_THAT(expression, IsOk());
  EXPECT_FALSE(expression->Evaluate(H200Inputs()).known);
  EXPECT_TRUE(expression->Evaluate(H200Inputs(Model("Llama-3.1-8B"))).known);
}

TEST(PolicyExpressionTest, RefusesWhatSomeProfileCouldNotEvaluate) {
  const ExpressionScope scope;
  auto refused = [&](const std::string& text, const std::string& why) {
    EXPECT_THAT(Expression::Compile(text, scope),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(why)))
        << text;
  };
  // A machine without a GPU has gpu.count 0.
  refused("model.parameters / gpu.count", "the divisor can be 0 for some profile");
  refused("1 / (gpu.count - 1)", "the divisor can be 0");
  refused("gpu.memory_total_bytes * 1e290", "can overflow");
  refused("gpu.kount", "unknown name 'gpu.kount'");
  refused("sqrt(2)", "unknown function 'sqrt'");
  refused("gpu.mig + 1", "needs a number, got a boolean");
  refused("if(gpu.mig, 1, 'x')", "both must be of one type");
  refused("engine.tensor_parallel_size", "not an engine argument defined earlier");
  refused("path.bits_per_weight", "this path gives no bits_per_weight");
  refused("1 +", "unexpected end");
  refused("clamp(1, 5, 2)", "low <= high");
  refused(std::string(kMaxExpressionBytes + 1, '1'), "at most");
  refused(std::string(40, '(') + "1" + std::string(40, ')'), "nested deeper than");
  std::string sum = "1";
  for (int i = 0; i < 200; ++i) sum += " + 1";
  refused(sum, "operations");
}

// --- Loading: rules and paths with GPU conditions ---------------------------

// The default policy with `extra_paths` before its paths and `extra_rules`
// before its rules.
std::string DefaultWith(const std::string& extra_paths, const std::string& extra_rules) {
  std::string text(DefaultPolicyYaml());
  text.replace(text.find("paths:\n") + 7, 0, extra_paths);
  text.replace(text.find("rules:\n") + 7, 0, extra_rules);
  return text;
}

TEST(PolicyGpuLoaderTest, AnEngineArgumentSomeProfileCannotEvaluateIsRefusedWithItsLine) {
  const std::string text = DefaultWith(
      "  - id: tp\n"
      "    name: bf16\n"
      "    rationale: r\n"
      "    engine_args:\n"
      "      tensor_parallel_size: model.attention_heads / gpu.count\n",
      "");
  const size_t line =
      std::count(text.begin(), text.begin() + text.find("tensor_parallel_size: model"), '\n') + 1;
  EXPECT_THAT(LoadPolicy(text, "fleet.yaml"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr(absl::StrCat("fleet.yaml:", line,
                                              ":29: paths[0].engine_args.tensor_parallel_size: "
                                              "expression 'model.attention_heads / gpu.count' at "
                                              "column 34: the divisor can be 0"))));
}

TEST(PolicyGpuLoaderTest, EngineArgumentsOutsideWhatTheEngineTakesAreRefused) {
  auto load = [](const std::string& args) {
    return LoadPolicy(DefaultWith("  - id: x\n    name: bf16\n    rationale: r\n"
                                  "    engine_args:\n" + args, ""),
                      "fleet.yaml");
  };
  EXPECT_THAT(load("      gpu_memory_utilization: gpu.memory_free_bytes / GiB\n"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("must lie in (0, 1]")));
  EXPECT_THAT(load("      tensor_parallel_size: gpu.count\n"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("must lie in [1, 512]")));
  EXPECT_THAT(load("      dtype: \"if(gpu.mig, 'bf16', 'auto')\"\n"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("dtype can be 'bf16', which is not one of")));
  EXPECT_THAT(load("      quantization: \"'fp8'\"\n"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("quantization is the path's own field")));
  EXPECT_THAT(load("      tensor_parallel_size: max(gpu.identical_count, 1)\n"), IsOk());
}

TEST(PolicyGpuLoaderTest, GpuRulesMustStillBeTotal) {
  // fp8 from 8.9, Marlin from 8.0, and nothing below: a T4 (7.5) would be
  // unmatched, so the policy is refused naming such a profile.
  std::string text(DefaultPolicyYaml());
  const std::string bf16_rule =
      "  - name: cuda-discrete-bf16\n"
      "    match:\n"
      "      hardware_class: [cuda_discrete]\n"
      "      supports_bf16: true\n";
  const std::string fp16_rule =
      "  - name: cuda-discrete-fp16\n"
      "    match:\n"
      "      hardware_class: [cuda_discrete]\n"
      "      supports_bf16: false\n";
  ASSERT_NE(text.find(bf16_rule), std::string::npos);
  text.replace(text.find(bf16_rule), bf16_rule.size(),
               "  - name: cuda-discrete-bf16\n"
               "    match:\n"
               "      hardware_class: [cuda_discrete]\n"
               "      gpu_capability: {at_least: 8.0}\n");
  text.replace(text.find(fp16_rule), fp16_rule.size(),
               "  - name: cuda-discrete-fp16\n"
               "    match:\n"
               "      hardware_class: [cuda_discrete]\n"
               "      gpu_capability: {at_least: 8.9}\n");
  EXPECT_THAT(LoadPolicy(text, "fleet.yaml"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       ::testing::AllOf(HasSubstr("the rules are not total"),
                                        HasSubstr("hardware_class=cuda_discrete"),
                                        HasSubstr("gpu_capability=0.0"))));
}

TEST(PolicyGpuLoaderTest, RangesAreCheckedWhereWritten) {
  auto load = [](const std::string& condition) {
    return LoadPolicy(DefaultWith("", "  - name: gpu\n    match:\n      " + condition +
                                          "\n    path: bf16-cuda\n"),
                      "fleet.yaml");
  };
  EXPECT_THAT(load("gpu_capability: 8.95"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("one digit after the point")));
  EXPECT_THAT(load("gpu_count: 1.5"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("whole number")));
  EXPECT_THAT(load("gpu_count: {at_least: 4, below: 2}"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("matches nothing")));
  EXPECT_THAT(load("gpu_memory_gib: 40"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("expected {at_least")));
  EXPECT_THAT(load("gpu_count: {at_lest: 2}"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("at_lest")));
  EXPECT_THAT(load("mig: yes"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(load("gpu_memory_gib: {at_least: 40}"), IsOk());
  EXPECT_THAT(load("l4t_major: 36"), IsOk());
  EXPECT_THAT(load("mig: true"), IsOk());
}

TEST(PolicyGpuLoaderTest, RuleTracesNameTheGpuConditionThatFailed) {
  auto policy = GpuFleet();
  const std::vector<std::string> trace =
      TraceRules(*policy, ExampleProfile("tesla-t4"), v1::PRIORITY_SPEED, Labels());
  EXPECT_THAT(trace, ::testing::Contains(HasSubstr("cuda-fp8-speed -> fp8-w8a8-cuda: no match "
                                                   "(gpu_capability)")));
}

// --- The default policy is unchanged on GPU machines ------------------------

TEST(PolicyGpuDefaultParityTest, DefaultPolicyKeepsTheModelDtypeAndNoEngineArguments) {
  const std::shared_ptr<const Policy> policy = DefaultPolicy();
  for (const std::string name : {"h200", "dgx-8xh100", "a100-mig-2x3g40gb", "rtx4090-busy"}) {
    EXPECT_EQ(Decide(*policy, GpuProfile(name)), "bf16-cuda") << name;
    EXPECT_TRUE(Kwargs(*policy, GpuProfile(name), Model("Llama-3.1-8B")).fields().empty()) << name;
  }
  EXPECT_EQ(Decide(*policy, GpuProfile("jetson-orin-r36")), "bf16-jetson");
}

// --- examples/policies/gpu-fleet.yaml on the captured machines -------------

TEST(PolicyGpuFleetTest, QuantizationFollowsCapability) {
  auto policy = GpuFleet();
  EXPECT_EQ(Decide(*policy, GpuProfile("h200")), "fp8-w8a8-cuda");          // 9.0
  EXPECT_EQ(Decide(*policy, GpuProfile("rtx4090-busy")), "fp8-w8a8-cuda");  // 8.9
  EXPECT_EQ(Decide(*policy, GpuProfile("a100-mig-2x3g40gb")), "w4a16-marlin-cuda");  // 8.0
  EXPECT_EQ(Decide(*policy, ExampleProfile("tesla-t4")), "fp16-cuda");  // 7.5, no bf16
  EXPECT_EQ(Decide(*policy, GpuProfile("h200"), v1::PRIORITY_FIDELITY), "bf16-cuda");
  // Jetson by L4T: Marlin on R36, the model dtype on R35.
  v1::HardwareProfile orin = GpuProfile("jetson-orin-r36");
  EXPECT_EQ(Decide(*policy, orin), "w4a16-marlin-jetson");
  orin.set_l4t_major(35);
  EXPECT_EQ(Decide(*policy, orin), "bf16-jetson");
  // The CPU and NPU decisions are the default policy's.
  const std::shared_ptr<const Policy> seed = DefaultPolicy();
  for (const std::string name : {"intel-sapphire-rapids", "amd-zen4", "aws-graviton3",
                                 "raspberry-pi-5", "snapdragon-8gen2"}) {
    for (v1::Priority priority : {v1::PRIORITY_SPEED, v1::PRIORITY_FIDELITY}) {
      EXPECT_EQ(Decide(*policy, ExampleProfile(name), priority),
                Decide(*seed, ExampleProfile(name), priority))
          << name;
    }
  }
}

TEST(PolicyGpuFleetTest, H200GetsFp8WithTheWholeContext) {
  auto policy = GpuFleet();
  const google::protobuf::Struct kwargs =
      Kwargs(*policy, GpuProfile("h200"), Model("Llama-3.1-8B"));
  EXPECT_EQ(Text(kwargs, "quantization"), "fp8");
  EXPECT_EQ(Number(kwargs, "tensor_parallel_size"), 1);
  EXPECT_EQ(Text(kwargs, "dtype"), "bfloat16");
  EXPECT_EQ(Text(kwargs, "kv_cache_dtype"), "fp8");
  EXPECT_THAT(Number(kwargs, "gpu_memory_utilization"),
              DoubleNear(149557313536.0 / 150109716480.0 - 0.05, 1e-12));
  EXPECT_EQ(Number(kwargs, "max_model_len"), 131072);
  const auto standings = Standings(*policy, GpuProfile("h200"), Model("Llama-3.1-8B"));
  EXPECT_EQ(standings.at("fp8-w8a8-cuda").fit.kind, FitKind::kRunnable);
}

TEST(PolicyGpuFleetTest, TensorParallelSpansIdenticalGpusThatDivideTheHeads) {
  auto policy = GpuFleet();
  EXPECT_EQ(Number(Kwargs(*policy, GpuProfile("dgx-8xh100"), Model("Llama-3.1-70B")),
                   "tensor_parallel_size"),
            8);
  // 12 heads on 8 GPUs: 6 is the largest count that divides them.
  EXPECT_EQ(Number(Kwargs(*policy, GpuProfile("dgx-8xh100"), Model("Synthetic-12-heads")),
                   "tensor_parallel_size"),
            6);
  // Two GPUs hidden: of 6 identical ones, 4 is the largest count dividing 64 heads.
  v1::HardwareProfile six = GpuProfile("dgx-8xh100");
  six.mutable_gpus(6)->set_usable(false);
  six.mutable_gpus(7)->set_usable(false);
  EXPECT_EQ(Number(Kwargs(*policy, six, Model("Llama-3.1-70B")), "tensor_parallel_size"), 4);
  // The 70B fp8 weights need 70.6 GB: on eight GPUs 8.8 GB each fits.
  const auto standings = Standings(*policy, GpuProfile("dgx-8xh100"), Model("Llama-3.1-70B"));
  EXPECT_EQ(standings.at("fp8-w8a8-cuda").fit.kind, FitKind::kRunnable);
}

TEST(PolicyGpuFleetTest, MigSlicesAreSizedByTheirOwnMemory) {
  auto policy = GpuFleet();
  const v1::HardwareProfile profile = GpuProfile("a100-mig-2x3g40gb");
  const google::protobuf::Struct kwargs = Kwargs(*policy, profile, Model("Llama-3.1-8B"));
  EXPECT_EQ(Text(kwargs, "quantization"), "gptq_marlin");
  EXPECT_EQ(Number(kwargs, "tensor_parallel_size"), 1);  // NCCL does not span MIG slices
  // The busier slice's free memory over the slice's own 40 GB.
  EXPECT_THAT(Number(kwargs, "gpu_memory_utilization"),
              DoubleNear(30000000000.0 / 42144366592.0 - 0.05, 1e-12));
  // A 70B model does not fit a 40 GB slice even at 4.25 bits (37.5 GB of weights).
  const auto standings = Standings(*policy, profile, Model("Llama-3.1-70B"));
  const PathStanding& marlin = standings.at("w4a16-marlin-cuda");
  EXPECT_EQ(marlin.standing, PathStandingKind::kChosen);
  EXPECT_EQ(marlin.fit.kind, FitKind::kIncompatible);
  EXPECT_EQ(marlin.fit.requirement, "requires.weights_per_gpu");
  // The fp8 path is ruled out by capability before memory is asked.
  EXPECT_EQ(standings.at("fp8-w8a8-cuda").standing, PathStandingKind::kIncompatible);
  EXPECT_THAT(standings.at("fp8-w8a8-cuda").reason, HasSubstr("gpu_capability at least 8.9"));
  EXPECT_THAT(standings.at("fp8-w8a8-cuda").reason, HasSubstr("this device has 8.0"));
}

TEST(PolicyGpuFleetTest, ABusyGpuIsShownWhatItLacks) {
  auto policy = GpuFleet();
  const v1::HardwareProfile profile = GpuProfile("rtx4090-busy");
  // 90% in use: 5% of the card is the budget, and 8 GB of fp8 weights do not fit.
  const auto standings = Standings(*policy, profile, Model("Llama-3.1-8B"));
  const PathStanding& fp8 = standings.at("fp8-w8a8-cuda");
  EXPECT_EQ(fp8.standing, PathStandingKind::kChosen);
  EXPECT_EQ(fp8.fit.kind, FitKind::kIncompatible);
  EXPECT_THAT(fp8.fit.reason, HasSubstr("the weights need 7.5 GiB per GPU; the budget is 1.2 GiB"));
  // No context fits: max_model_len is left out rather than sent as 0 or less.
  const google::protobuf::Struct kwargs = Kwargs(*policy, profile, Model("Llama-3.1-8B"));
  EXPECT_EQ(kwargs.fields().count("max_model_len"), 0u);
}

TEST(PolicyGpuFleetTest, LowMemoryNamesTheNeedAndTheContextThatFits) {
  auto policy = GpuFleet();
  // The RTX 4090 idle (a profile of an older probe: free memory unknown,
  // read as all free): bf16 weights fit, the full 128k context does not.
  const auto standings = Standings(*policy, ExampleProfile("rtx-4090"), Model("Llama-3.1-8B"));
  const PathStanding& bf16 = standings.at("bf16-cuda");
  EXPECT_EQ(bf16.standing, PathStandingKind::kChosen);  // at priority fidelity
  EXPECT_EQ(bf16.fit.kind, FitKind::kLowMemory);
  ASSERT_TRUE(bf16.fit.memory_per_gpu_bytes.has_value());
  ASSERT_TRUE(bf16.fit.max_model_len.has_value());
  // 16.06 GB of weights + 1 GiB + 128 KiB of KV cache per token for 131072 tokens.
  EXPECT_EQ(*bf16.fit.memory_per_gpu_bytes,
            static_cast<uint64_t>(8030261248.0 * 2 + 1073741824.0 + 131072.0 * 131072.0));
  const double budget = 0.95 * 25757220864.0;
  EXPECT_EQ(*bf16.fit.max_model_len,
            static_cast<uint64_t>((budget - 8030261248.0 * 2 - 1073741824.0) / 131072.0));
  EXPECT_THAT(bf16.fit.reason, HasSubstr("tokens fits"));
  // fp8 (half the weights, an fp8 KV cache) runs with the whole context.
  EXPECT_EQ(standings.at("fp8-w8a8-cuda").fit.kind, FitKind::kRunnable);
}

TEST(PolicyGpuFleetTest, WithoutModelFactsArgumentsThatNeedThemAreLeftOut) {
  auto policy = GpuFleet();
  const google::protobuf::Struct kwargs = Kwargs(*policy, GpuProfile("h200"), ModelFacts());
  EXPECT_EQ(Text(kwargs, "quantization"), "fp8");
  EXPECT_EQ(Text(kwargs, "dtype"), "bfloat16");
  EXPECT_EQ(kwargs.fields().count("tensor_parallel_size"), 0u);
  EXPECT_EQ(kwargs.fields().count("max_model_len"), 0u);
  const auto standings = Standings(*policy, GpuProfile("h200"), ModelFacts());
  EXPECT_EQ(standings.at("fp8-w8a8-cuda").fit.kind, FitKind::kRunnable);
  EXPECT_THAT(standings.at("fp8-w8a8-cuda").fit.reason, HasSubstr("not judged"));
}

TEST(PolicyModelFactsTest, OutOfRangeFactsAreRefusedWithTheirLine) {
  EXPECT_THAT(ParseModelFactsDocument("model_facts:\n  m:\n    attention_heads: 0\n", "c.yaml"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("c.yaml:3")));
  EXPECT_THAT(ParseModelFactsDocument(
                  "model_facts:\n  m:\n    attention_heads: 8\n    kv_heads: 16\n", "c.yaml"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("exceeds attention_heads")));
  EXPECT_THAT(ParseModelFactsDocument("model_facts:\n  m:\n    heads: 8\n", "c.yaml"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("heads")));
}

}  // namespace
}  // namespace weightpath::policy
