// One test per validation fault: each refuses the whole document with
// INVALID_ARGUMENT naming the file, the line and the field path.
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "absl/strings/str_cat.h"
#include "policy/content_version.h"
#include "policy/cpu_model.h"
#include "policy/policy_limits.h"
#include "policy/policy.h"
#include "tests/testing/status_matchers.h"

namespace weightpath::policy {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::weightpath::testing::IsOk;
using ::weightpath::testing::StatusIs;

// Line numbers below refer to this document (line 1 is "schema: 1").
constexpr char kValidPolicy[] = R"(schema: 1
paths:
  - id: tinygemm-g128
    name: w4a16-tinygemm
    quantization: cpu_int4
    group_size: 128
    bits_per_weight: 4.25
    rationale: bf16 activations
  - id: keep-dtype
    name: bf16
    bits_per_weight: 16.0
    rationale: the model dtype
rules:
  - name: cpus
    match:
      hardware_class: [x86_cpu, arm64_cpu]
    path: tinygemm-g128
  - name: everything-else
    path: keep-dtype
)";

std::string Edited(std::string_view from, std::string_view to) {
  std::string text = kValidPolicy;
  size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  text.replace(at, from.size(), to);
  return text;
}

absl::StatusOr<std::shared_ptr<const Policy>> Load(const std::string& text) {
  return LoadPolicy(text, "test.yaml");
}

TEST(PolicyLoaderTest, ValidDocumentLoads) {
  absl::StatusOr<std::shared_ptr<const Policy>> policy = Load(kValidPolicy);
  ASSERT_THAT(policy, IsOk());
  EXPECT_EQ((*policy)->paths().size(), 2u);
  EXPECT_EQ((*policy)->rules().size(), 2u);
  EXPECT_EQ((*policy)->source_name(), "test.yaml");
}

TEST(PolicyLoaderTest, UnknownTopLevelKey) {
  EXPECT_THAT(Load(Edited("schema: 1\n", "schema: 1\ndefaults: {}\n")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("test.yaml:2:1: defaults: unknown key 'defaults'"),
                             HasSubstr("allowed: schema, paths, rules"))));
}

TEST(PolicyLoaderTest, UnknownPathKey) {
  EXPECT_THAT(Load(Edited("    quantization: cpu_int4", "    quantisation: cpu_int4")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("test.yaml:5:5: paths[0].quantisation: unknown key")));
}

TEST(PolicyLoaderTest, UnknownMatchKey) {
  EXPECT_THAT(Load(Edited("      hardware_class: [x86_cpu, arm64_cpu]",
                          "      hardware_class: [x86_cpu, arm64_cpu]\n      cpu_flag_any: [avx2]")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("test.yaml:17:7: rules[0].match.cpu_flag_any: unknown key")));
}

TEST(PolicyLoaderTest, UnknownExpectedFiguresKey) {
  EXPECT_THAT(Load(Edited("    rationale: bf16 activations",
                          "    rationale: bf16 activations\n    expected:\n      - tok_s: 80")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("test.yaml:10:9: paths[0].expected[0].tok_s: unknown key")));
}

// CPU names as /proc/cpuinfo writes them and as a policy does compare equal
// once normalised; anything that tells two parts apart is kept.
TEST(PolicyCpuModelTest, NamesAreComparedNormalised) {
  EXPECT_EQ(NormalizeCpuModel("Intel(R) Xeon(R) Platinum 8480C"), "intel xeon platinum 8480c");
  EXPECT_EQ(NormalizeCpuModel("Intel Xeon Platinum 8480C"), "intel xeon platinum 8480c");
  EXPECT_EQ(NormalizeCpuModel("Intel(R) Core(TM) i7-8700 CPU @ 3.20GHz"), "intel core i7-8700");
  EXPECT_EQ(NormalizeCpuModel("  AMD EPYC 9654 96-Core Processor "), "amd epyc 9654 96-core");
  EXPECT_EQ(NormalizeCpuModel("Intel Xeon Gold 6430 2.10GHz"), "intel xeon gold 6430");
  EXPECT_EQ(NormalizeCpuModel("INTEL\tXEON  PLATINUM 8480+"), "intel xeon platinum 8480+");
  EXPECT_NE(NormalizeCpuModel("Intel Xeon Platinum 8480C"), NormalizeCpuModel("Intel Xeon Platinum 8468"));
  EXPECT_NE(NormalizeCpuModel("Intel Xeon Platinum 8480C"), NormalizeCpuModel("Intel Xeon Platinum 8480+"));
}

TEST(PolicyCpuModelTest, AliasesAndPatternsNameMoreCpusForOneFigure) {
  ExpectedFigures figures;
  figures.cpu_model = "Intel Xeon Platinum 8480C";
  EXPECT_TRUE(FiguresMatchCpu(figures, NormalizeCpuModel("Intel(R) Xeon(R) Platinum 8480C")));
  EXPECT_FALSE(FiguresMatchCpu(figures, NormalizeCpuModel("Intel(R) Xeon(R) Platinum 8480+")));
  figures.cpu_model_aliases = {"Intel Xeon Platinum 8480+", "Intel(R) Xeon(R) Platinum 847*"};
  EXPECT_TRUE(FiguresMatchCpu(figures, NormalizeCpuModel("Intel(R) Xeon(R) Platinum 8480+")));
  EXPECT_TRUE(FiguresMatchCpu(figures, NormalizeCpuModel("Intel(R) Xeon(R) Platinum 8470Q")));
  EXPECT_FALSE(FiguresMatchCpu(figures, NormalizeCpuModel("Intel(R) Xeon(R) Platinum 8468")));
  EXPECT_FALSE(FiguresMatchCpu(figures, NormalizeCpuModel("Intel(R) Xeon(R) Gold 6430")));

  EXPECT_TRUE(CpuModelGlobMatches("*", ""));
  EXPECT_TRUE(CpuModelGlobMatches("a*b*c", "axxbyyc"));
  EXPECT_TRUE(CpuModelGlobMatches("a*c", "abcbc"));
  EXPECT_FALSE(CpuModelGlobMatches("a*c", "abcb"));
  EXPECT_FALSE(CpuModelGlobMatches("abc", "abcd"));
  EXPECT_TRUE(CpuModelGlobMatches("**x", "yyx"));
  // Linear-backtracking: a long name against many stars stays cheap.
  EXPECT_FALSE(CpuModelGlobMatches("*a*a*a*a*a*a*a*b", std::string(4096, 'a')));
}

TEST(PolicyLoaderTest, ExpectedFiguresTakeCpuModelAliases) {
  const std::string figures =
      "    rationale: bf16 activations\n"
      "    expected:\n"
      "      - cpu_model: Intel Xeon Platinum 8480C\n"
      "        cpu_model_aliases: [Intel Xeon Platinum 8480+, \"Intel Xeon Platinum 847*\"]\n"
      "        threads: 24\n"
      "        decode_tok_s: 80.0";
  absl::StatusOr<std::shared_ptr<const Policy>> policy =
      Load(Edited("    rationale: bf16 activations", figures));
  ASSERT_THAT(policy, IsOk());
  ASSERT_EQ((*policy)->paths()[0].expected.size(), 1u);
  EXPECT_THAT((*policy)->paths()[0].expected[0].cpu_model_aliases,
              ::testing::ElementsAre("Intel Xeon Platinum 8480+", "Intel Xeon Platinum 847*"));

  EXPECT_THAT(Load(Edited("    rationale: bf16 activations",
                          "    rationale: bf16 activations\n    expected:\n"
                          "      - cpu_model: Intel Xeon Platinum 8480C\n"
                          "        cpu_model_aliases: [\"(R) CPU @ 2GHz\"]")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("paths[0].expected[0].cpu_model_aliases[0]: names no CPU")));
  EXPECT_THAT(Load(Edited("    rationale: bf16 activations",
                          "    rationale: bf16 activations\n    expected:\n"
                          "      - cpu_model: Intel Xeon Platinum 8480C\n"
                          "        cpu_model_aliases: [\"**\"]")),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("names no CPU")));
  EXPECT_THAT(Load(Edited("    rationale: bf16 activations",
                          "    rationale: bf16 activations\n    expected:\n"
                          "      - cpu_model_aliases: [Intel Xeon Platinum 8480+]\n"
                          "        decode_tok_s: 80.0")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("test.yaml:10:9: paths[0].expected[0].cpu_model_aliases: needs "
                                 "the cpu_model")));
  EXPECT_THAT(Load(Edited("    rationale: bf16 activations",
                          "    rationale: bf16 activations\n    expected:\n"
                          "      - cpu_model: Intel Xeon Platinum 8480C\n"
                          "        cpu_model_aliases: Intel Xeon Platinum 8480+")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("paths[0].expected[0].cpu_model_aliases")));
  std::string many = "[";
  for (size_t i = 0; i <= kMaxCpuModelAliases; ++i) absl::StrAppend(&many, i == 0 ? "" : ", ", "cpu", i);
  many += "]";
  EXPECT_THAT(Load(Edited("    rationale: bf16 activations",
                          "    rationale: bf16 activations\n    expected:\n"
                          "      - cpu_model: Intel Xeon Platinum 8480C\n"
                          "        cpu_model_aliases: " + many)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("65 aliases; at most 64")));
}

TEST(PolicyLoaderTest, RuleNamingUndefinedPath) {
  EXPECT_THAT(Load(Edited("    path: keep-dtype", "    path: keep-dtpye")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("test.yaml:19:11: rules[1].path"),
                             HasSubstr("undefined path id 'keep-dtpye'"))));
}

TEST(PolicyLoaderTest, DuplicatePathId) {
  EXPECT_THAT(Load(Edited("  - id: keep-dtype", "  - id: tinygemm-g128")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("test.yaml:9:9: paths[1].id"),
                             HasSubstr("duplicate path id 'tinygemm-g128'"))));
}

TEST(PolicyLoaderTest, FourBitPathWithWrongBitsPerWeight) {
  // The figure the seed carried before its correction.
  EXPECT_THAT(Load(Edited("bits_per_weight: 4.25", "bits_per_weight: 4.16")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("test.yaml:7:22: paths[0].bits_per_weight"),
                             HasSubstr("4 + 32/group_size = 4.25"))));
  EXPECT_THAT(Load(Edited("group_size: 128", "group_size: 32")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("4 + 32/group_size = 5 for group_size 32")));
}

TEST(PolicyLoaderTest, PolicyThatIsNotTotal) {
  // Without the catch-all, no rule covers GPUs or phones.
  std::string text = kValidPolicy;
  text = text.substr(0, text.find("  - name: everything-else"));
  EXPECT_THAT(Load(text), StatusIs(absl::StatusCode::kInvalidArgument,
                                   AllOf(HasSubstr("test.yaml:13: the rules are not total"),
                                         HasSubstr("hardware_class=jetson"))));
}

TEST(PolicyLoaderTest, NonTotalityFoundThroughFlagsPriorityAndLabels) {
  const std::string text = R"(schema: 1
paths:
  - {id: a, name: a, rationale: r}
rules:
  - name: amx-speed
    match: {hardware_class: x86_cpu, cpu_flags_any: [amx_tile], priority: speed}
    path: a
  - name: agentic
    match: {labels: {workload: agentic}}
    path: a
  - name: not-x86
    match: {hardware_class: [jetson, cuda_discrete, arm64_cpu, npu_phone]}
    path: a
)";
  EXPECT_THAT(LoadPolicy(text, "p.yaml"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("p.yaml:4: the rules are not total"),
                             HasSubstr("hardware_class=x86_cpu arch=x86_64"),
                             HasSubstr("cpu_flags=[] priority=speed labels={workload=<absent>}"))));
}

TEST(PolicyLoaderTest, ArchConditionsMustCoverEveryArchBehindAnAccelerator) {
  const std::string text = R"(schema: 1
paths:
  - {id: a, name: a, rationale: r}
rules:
  - name: jetson-on-arm
    match: {hardware_class: jetson, arch: aarch64}
    path: a
  - name: rest
    match: {hardware_class: [cuda_discrete, arm64_cpu, x86_cpu, npu_phone]}
    path: a
)";
  EXPECT_THAT(LoadPolicy(text, "p.yaml"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("hardware_class=jetson arch=<an arch no rule names>")));
}

TEST(PolicyLoaderTest, PolicyTooComplexToCheck) {
  std::string flags;
  for (int i = 0; i < 24; ++i) flags += (i ? ", f" : "f") + std::to_string(i);
  const std::string text = "schema: 1\npaths:\n  - {id: a, name: a, rationale: r}\nrules:\n"
                           "  - name: many\n    match: {cpu_flags_none: [" + flags +
                           "]}\n    path: a\n  - name: rest\n    path: a\n";
  EXPECT_THAT(LoadPolicy(text, "p.yaml"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("p.yaml:4: policy too complex to check for totality"),
                             HasSubstr("24 cpu flags"))));
}

TEST(PolicyLoaderTest, InvalidYamlSyntax) {
  EXPECT_THAT(Load(Edited("    name: bf16", "    name: [bf16")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("test.yaml:"), HasSubstr("not valid YAML"))));
}

TEST(PolicyLoaderTest, WrongValueTypes) {
  EXPECT_THAT(Load(Edited("group_size: 128", "group_size: large")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("test.yaml:6:17: paths[0].group_size: expected a non-negative "
                                 "integer, got 'large'")));
  EXPECT_THAT(Load(Edited("    name: bf16", "    name: bf16\n    verified: maybe")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("test.yaml:11:15: paths[1].verified: expected true or false")));
  EXPECT_THAT(Load(Edited("    name: bf16", "    name: bf16\n    notes: {a: b}")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("paths[1].notes: expected a list of strings, got a mapping")));
}

TEST(PolicyLoaderTest, UnknownHardwareClassAndPriorityNames) {
  EXPECT_THAT(Load(Edited("[x86_cpu, arm64_cpu]", "[x86_cpu, arm_cpu]")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("test.yaml:16:23: rules[0].match.hardware_class"),
                             HasSubstr("'arm_cpu' is not one of"))));
  EXPECT_THAT(Load(Edited("[x86_cpu, arm64_cpu]", "[x86_cpu, arm64_cpu]\n      priority: fast")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("rules[0].match.priority"),
                             HasSubstr("'fast' is not one of speed, fidelity"))));
}

TEST(PolicyLoaderTest, MatchWithoutConditionsIsAMappingNotNothing) {
  EXPECT_THAT(Load(Edited("    match:\n      hardware_class: [x86_cpu, arm64_cpu]", "    match:")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("test.yaml:15:5: rules[0].match: expected a mapping, got nothing")));
}

TEST(PolicyLoaderTest, EmptyConditionListMatchesNothing) {
  EXPECT_THAT(Load(Edited("[x86_cpu, arm64_cpu]", "[]")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("rules[0].match.hardware_class"),
                             HasSubstr("an empty list matches nothing"))));
}

TEST(PolicyLoaderTest, UnsupportedSchemaAndMissingSections) {
  EXPECT_THAT(Load(Edited("schema: 1", "schema: 2")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("test.yaml:1:9: schema: unsupported schema 2")));
  std::string no_rules = kValidPolicy;
  no_rules = no_rules.substr(0, no_rules.find("rules:"));
  EXPECT_THAT(Load(no_rules), StatusIs(absl::StatusCode::kInvalidArgument,
                                       HasSubstr("rules: is required")));
  EXPECT_THAT(Load(Edited("    path: keep-dtype", "")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("rules[1].path: is required")));
  EXPECT_THAT(Load(""), StatusIs(absl::StatusCode::kInvalidArgument,
                                 HasSubstr("test.yaml: document: is empty")));
}

TEST(PolicyLoaderTest, DuplicateKeysAndRuleNames) {
  EXPECT_THAT(Load(Edited("    name: bf16", "    name: bf16\n    name: fp16")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("test.yaml:11:5: paths[1].name: duplicate key")));
  EXPECT_THAT(Load(Edited("  - name: everything-else", "  - name: cpus")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("rules[1].name"), HasSubstr("duplicate rule name 'cpus'"))));
}

TEST(PolicyLoaderTest, LabelConditionsMustBeKeyValueStrings) {
  EXPECT_THAT(Load(Edited("[x86_cpu, arm64_cpu]", "[x86_cpu, arm64_cpu]\n      labels: [a]")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("rules[0].match.labels"),
                             HasSubstr("expected a mapping of label key to value"))));
  EXPECT_THAT(Load(Edited("[x86_cpu, arm64_cpu]",
                          "[x86_cpu, arm64_cpu]\n      labels: {workload: {a: b}}")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("rules[0].match.labels.workload: expected a non-empty string")));
}

TEST(PolicyLoaderTest, RulesShadowedByEarlierOnesAreReported) {
  absl::StatusOr<std::shared_ptr<const Policy>> policy =
      Load(std::string(kValidPolicy) + "  - name: never\n    path: tinygemm-g128\n");
  ASSERT_THAT(policy, IsOk());
  EXPECT_THAT((*policy)->UnreachableRuleNames(), ::testing::ElementsAre("never"));
  EXPECT_THAT((*policy)->ReachablePathNames(), ::testing::ElementsAre("w4a16-tinygemm", "bf16"));
}

TEST(PolicyLoaderTest, VersionIsAContentHash) {
  absl::StatusOr<std::shared_ptr<const Policy>> first = Load(kValidPolicy);
  absl::StatusOr<std::shared_ptr<const Policy>> same = LoadPolicy(kValidPolicy, "other.yaml");
  absl::StatusOr<std::shared_ptr<const Policy>> edited =
      Load(std::string(kValidPolicy) + "# a comment\n");
  ASSERT_THAT(first, IsOk());
  ASSERT_THAT(same, IsOk());
  ASSERT_THAT(edited, IsOk());
  EXPECT_THAT((*first)->version(), ::testing::MatchesRegex("sha256:[0-9a-f]{16}"));
  EXPECT_EQ((*first)->version(), (*same)->version());
  EXPECT_NE((*first)->version(), (*edited)->version());
  // FIPS 180-2's test vector: SHA-256("abc") = ba7816bf8f01cfea...
  EXPECT_EQ(ContentVersion("abc"), "sha256:ba7816bf8f01cfea");
}

}  // namespace
}  // namespace weightpath::policy
