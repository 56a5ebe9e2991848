// Evaluation beyond the default policy: labels, traces, bad inputs, the
// message fillers, and the promise that deciding does not allocate.
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "policy/policy.h"
#include "tests/policy/allocation_counter.h"
#include "tests/testing/status_matchers.h"

namespace weightpath::policy {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::weightpath::testing::IsOk;
using ::weightpath::testing::StatusIs;

constexpr char kLabelPolicy[] = R"(schema: 1
paths:
  - {id: fast, name: w4a8-amx, quantization: gptq, group_size: 128, bits_per_weight: 4.25, rationale: fast}
  - {id: faithful, name: w4a16-tinygemm, quantization: cpu_int4, group_size: 128, bits_per_weight: 4.25, rationale: faithful}
  - {id: export, name: export, runs_in_vllm: false, quantization: qnn, rationale: exported}
rules:
  - name: agentic-wants-fidelity
    match: {labels: {workload: agentic}, hardware_class: x86_cpu}
    path: faithful
  - name: phones-export
    match: {hardware_class: npu_phone}
    path: export
  - name: amx-speed
    match: {hardware_class: x86_cpu, cpu_flags_all: [amx_tile, amx_bf16], cpu_flags_none: [noamx], priority: speed}
    path: fast
  - name: rest
    path: faithful
)";

v1::HardwareProfile AmxProfile() {
  v1::HardwareProfile profile;
  profile.set_arch("x86_64");
  profile.set_accelerator("none");
  for (const char* flag : {"fpu", "avx512f", "amx_bf16", "amx_tile", "amx_int8"}) {
    profile.add_cpu_flags(flag);
  }
  return profile;
}

std::shared_ptr<const Policy> LabelPolicy() {
  absl::StatusOr<std::shared_ptr<const Policy>> policy = LoadPolicy(kLabelPolicy, "labels.yaml");
  EXPECT_THAT(policy, IsOk());
  return policy.ok() ? *policy : nullptr;
}

// Flags of 64 characters or more were skipped before comparing (the
// length filter's mask has 64 bits), so a rule naming one never saw it in a
// profile: cpu_flags_any did not match, cpu_flags_none matched anyway.
TEST(PolicyEvaluateTest, FlagsOfSixtyFourCharactersOrMoreAreCompared) {
  const std::string long_flag(70, 'x');
  const std::string text = absl::StrCat(R"(schema: 1
paths:
  - {id: fast, name: w4a8-amx, quantization: gptq, group_size: 128, bits_per_weight: 4.25, rationale: fast}
  - {id: faithful, name: w4a16-tinygemm, quantization: cpu_int4, group_size: 128, bits_per_weight: 4.25, rationale: faithful}
rules:
  - name: long-flag
    match: {cpu_flags_any: [)", long_flag, R"(]}
    path: fast
  - name: without-long-flag
    match: {cpu_flags_none: [)", long_flag, R"(]}
    path: faithful
  - name: rest
    path: faithful
)");
  absl::StatusOr<std::shared_ptr<const Policy>> policy = LoadPolicy(text, "long-flag.yaml");
  ASSERT_THAT(policy, IsOk());
  v1::HardwareProfile profile = AmxProfile();
  profile.add_cpu_flags(long_flag);
  absl::StatusOr<Decision> decision = Evaluate(**policy, profile, v1::PRIORITY_SPEED, Labels());
  ASSERT_THAT(decision, IsOk());
  EXPECT_EQ(decision->rule->name, "long-flag");
  // One character short of it is another flag.
  v1::HardwareProfile other = AmxProfile();
  other.add_cpu_flags(std::string(69, 'x'));
  decision = Evaluate(**policy, other, v1::PRIORITY_SPEED, Labels());
  ASSERT_THAT(decision, IsOk());
  EXPECT_EQ(decision->rule->name, "without-long-flag");
}

TEST(PolicyEvaluateTest, LabelsSteerTheDecision) {
  std::shared_ptr<const Policy> policy = LabelPolicy();
  ASSERT_NE(policy, nullptr);
  Labels agentic;
  agentic["workload"] = "agentic";
  Labels chat;
  chat["workload"] = "chat";
  EXPECT_EQ((*Evaluate(*policy, AmxProfile(), v1::PRIORITY_SPEED, agentic)).path->id, "faithful");
  EXPECT_EQ((*Evaluate(*policy, AmxProfile(), v1::PRIORITY_SPEED, chat)).path->id, "fast");
  EXPECT_EQ((*Evaluate(*policy, AmxProfile(), v1::PRIORITY_SPEED, Labels())).path->id, "fast");
}

// The overload for an already classified profile decides exactly as the
// one that classifies, at every priority and label set.
TEST(PolicyEvaluateTest, AGivenHardwareClassDecidesAsClassifying) {
  std::shared_ptr<const Policy> policy = LabelPolicy();
  ASSERT_NE(policy, nullptr);
  Labels agentic;
  agentic["workload"] = "agentic";
  v1::HardwareProfile phone;
  phone.set_arch("aarch64");
  phone.set_accelerator("npu:qualcomm");
  for (const v1::HardwareProfile& profile : {AmxProfile(), phone}) {
    const absl::StatusOr<HardwareClass> hardware_class = ClassifyHardware(profile);
    ASSERT_THAT(hardware_class, IsOk());
    for (const v1::Priority priority : {v1::PRIORITY_UNSPECIFIED, v1::PRIORITY_SPEED,
                                        v1::PRIORITY_FIDELITY}) {
      for (const Labels& labels : {Labels(), agentic}) {
        const absl::StatusOr<Decision> classifying = Evaluate(*policy, profile, priority, labels);
        const absl::StatusOr<Decision> given =
            Evaluate(*policy, *hardware_class, profile, priority, labels);
        ASSERT_THAT(classifying, IsOk());
        ASSERT_THAT(given, IsOk());
        EXPECT_EQ(given->hardware_class, classifying->hardware_class);
        EXPECT_EQ(given->rule, classifying->rule);
        EXPECT_EQ(given->path, classifying->path);
        EXPECT_EQ(given->effective_priority, classifying->effective_priority);
      }
    }
  }
  EXPECT_THAT(Evaluate(*policy, HardwareClass::kX86Cpu, AmxProfile(),
                       static_cast<v1::Priority>(7), Labels()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("priority 7")));
}

TEST(PolicyEvaluateTest, FlagConditionsAllAndNone) {
  std::shared_ptr<const Policy> policy = LabelPolicy();
  ASSERT_NE(policy, nullptr);
  v1::HardwareProfile tile_only = AmxProfile();
  tile_only.clear_cpu_flags();
  tile_only.add_cpu_flags("amx_tile");
  EXPECT_EQ((*Evaluate(*policy, tile_only, v1::PRIORITY_SPEED, Labels())).rule->name, "rest");
  v1::HardwareProfile vetoed = AmxProfile();
  vetoed.add_cpu_flags("noamx");
  EXPECT_EQ((*Evaluate(*policy, vetoed, v1::PRIORITY_SPEED, Labels())).rule->name, "rest");
}

TEST(PolicyEvaluateTest, RefusesUnknownCpuAndUnknownPriority) {
  std::shared_ptr<const Policy> policy = DefaultPolicy();
  v1::HardwareProfile riscv;
  riscv.set_arch("riscv64");
  riscv.set_accelerator("none");
  EXPECT_THAT(Evaluate(*policy, riscv, v1::PRIORITY_SPEED, Labels()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("profile.arch 'riscv64'")));
  EXPECT_THAT(Evaluate(*policy, AmxProfile(), static_cast<v1::Priority>(7), Labels()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("priority 7")));
}

TEST(PolicyEvaluateTest, TraceShowsEachRuleAndWhyItFailed) {
  std::shared_ptr<const Policy> policy = DefaultPolicy();
  EXPECT_THAT(TraceRules(*policy, AmxProfile(), v1::PRIORITY_FIDELITY, Labels()),
              ElementsAre("npu-phone-export -> export-qnn-w8a16: no match (hardware_class)",
                          "cuda-discrete-bf16 -> bf16-cuda: no match (hardware_class)",
                          "cuda-discrete-fp16 -> fp16-cuda: no match (hardware_class)",
                          "jetson-bf16 -> bf16-jetson: no match (hardware_class)",
                          "jetson-fp16 -> fp16-jetson: no match (hardware_class)",
                          "arm64-cpu-tinygemm -> w4a16-tinygemm-arm64: no match (hardware_class)",
                          "x86-amx-speed -> w4a8-amx: no match (priority)",
                          "x86-tinygemm -> w4a16-tinygemm-x86: matched, chosen"));
  std::vector<std::string> speed = TraceRules(*policy, AmxProfile(), v1::PRIORITY_SPEED, Labels());
  ASSERT_EQ(speed.size(), 8u);
  EXPECT_EQ(speed[6], "x86-amx-speed -> w4a8-amx: matched, chosen");
  EXPECT_EQ(speed[7], "x86-tinygemm -> w4a16-tinygemm-x86: matched, but an earlier rule was chosen");
  v1::HardwareProfile riscv;
  riscv.set_arch("riscv64");
  EXPECT_THAT(TraceRules(*policy, riscv, v1::PRIORITY_SPEED, Labels()),
              ElementsAre(HasSubstr("profile.arch 'riscv64'")));
}

TEST(PolicyEvaluateTest, EngineKwargsEmptyWhenNotRunInVllmEvenIfQuantized) {
  std::shared_ptr<const Policy> policy = LabelPolicy();
  ASSERT_NE(policy, nullptr);
  google::protobuf::Struct kwargs;
  (*kwargs.mutable_fields())["stale"].set_bool_value(true);
  FillEngineKwargs(*policy->FindPath("export"), &kwargs);
  EXPECT_EQ(kwargs.fields_size(), 0);
  FillEngineKwargs(*policy->FindPath("fast"), &kwargs);
  ASSERT_EQ(kwargs.fields_size(), 1);
  EXPECT_EQ(kwargs.fields().at("quantization").string_value(), "gptq");
  EXPECT_EQ(policy->FindPath("missing"), nullptr);
}

TEST(PolicyEvaluateTest, FillWeightPathSpecCopiesExpectedFigures) {
  v1::WeightPathSpec spec;
  spec.set_name("stale");
  FillWeightPathSpec(*DefaultPolicy()->FindPath("w4a8-amx"), &spec);
  EXPECT_EQ(spec.path_id(), "w4a8-amx");
  ASSERT_EQ(spec.expected_size(), 3);
  EXPECT_EQ(spec.expected(0).cpu_model(), "Intel Xeon Platinum 8480C");
  EXPECT_EQ(spec.expected(0).threads(), 24u);
  EXPECT_DOUBLE_EQ(spec.expected(0).decode_tok_s(), 86.6);
  EXPECT_FALSE(spec.expected(0).has_prefill_vs_llama_cpp());
  EXPECT_DOUBLE_EQ(spec.expected(1).decode_tok_s(), 84.5);
  EXPECT_DOUBLE_EQ(spec.expected(1).prefill_vs_llama_cpp(), 3.0);
  EXPECT_EQ(spec.expected(2).fidelity_exact_matches(), 1u);
  EXPECT_EQ(spec.expected(2).fidelity_prompts(), 12u);
}

TEST(PolicyEvaluateTest, EvaluateDoesNotAllocate) {
  std::shared_ptr<const Policy> labelled = LabelPolicy();
  ASSERT_NE(labelled, nullptr);
  std::shared_ptr<const Policy> fallback = DefaultPolicy();
  v1::HardwareProfile profile = AmxProfile();
  Labels labels;
  labels["workload"] = "chat";
  ::weightpath::testing::StartCountingAllocations();
  bool all_ok = true;
  for (v1::Priority priority : {v1::PRIORITY_SPEED, v1::PRIORITY_FIDELITY}) {
    all_ok = all_ok && Evaluate(*fallback, profile, priority, labels).ok();
    all_ok = all_ok && Evaluate(*labelled, profile, priority, labels).ok();
  }
  const long allocations = ::weightpath::testing::StopCountingAllocations();
  EXPECT_TRUE(all_ok);
  EXPECT_EQ(allocations, 0);
}

}  // namespace
}  // namespace weightpath::policy
