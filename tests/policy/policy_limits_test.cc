// The limits that keep one policy load (a hot reload on a serving server)
// short and small: rule and path counts, the totality check's work, YAML
// alias expansion, and cancellation. Each refusal names the limit.
#include <atomic>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "policy/compiled_rules.h"
#include "policy/policy.h"
#include "policy/policy_document.h"
#include "policy/policy_limits.h"
#include "policy/totality.h"
#include "tests/testing/status_matchers.h"

namespace weightpath::policy {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::weightpath::testing::IsOk;
using ::weightpath::testing::StatusIs;

constexpr char kHeader[] = "schema: 1\npaths:\n  - {id: a, name: a, rationale: r}\nrules:\n";

// `count` rules that each need label tier=<i>, then a catch-all: every
// profile without a matching label is tested against all of them.
std::string LabelRules(size_t count, const std::string& extra_match = "") {
  std::string text = kHeader;
  for (size_t i = 0; i < count; ++i) {
    absl::StrAppend(&text, "  - {name: r", i, ", path: a, match: {labels: {tier: t", i, "}",
                    extra_match, "}}\n");
  }
  absl::StrAppend(&text, "  - {name: rest, path: a}\n");
  return text;
}

TEST(PolicyLimitsTest, TooManyRulesIsRefusedBeforeAnyIsRead) {
  const absl::Time start = absl::Now();
  EXPECT_THAT(LoadPolicy(LabelRules(kMaxPolicyRules), "p.yaml"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("p.yaml:5:3: rules: 1001 rules; a policy may have at most 1000")));
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
}

TEST(PolicyLimitsTest, FortyThousandRulesAreRefusedQuickly) {
  // The hostile shape: 40,000 valid rules (~2.7 MB) used to spend minutes in
  // the totality check.
  const std::string text = LabelRules(40000);
  const absl::Time start = absl::Now();
  absl::StatusOr<std::shared_ptr<const Policy>> loaded = LoadPolicy(text, "p.yaml");
  const absl::Duration took = absl::Now() - start;
  // Its YAML alone is over the node limit, which is checked first.
  EXPECT_THAT(loaded, StatusIs(absl::StatusCode::kInvalidArgument,
                               HasSubstr(absl::StrCat("more than ", kMaxPolicyNodes,
                                                      " nodes once aliases are expanded"))));
  EXPECT_LT(took, absl::Seconds(5));
}

TEST(PolicyLimitsTest, TooManyPathsIsRefused) {
  std::string text = "schema: 1\npaths:\n";
  for (size_t i = 0; i <= kMaxPolicyPaths; ++i) {
    absl::StrAppend(&text, "  - {id: p", i, ", name: n", i, ", rationale: r}\n");
  }
  absl::StrAppend(&text, "rules:\n  - {name: rest, path: p0}\n");
  EXPECT_THAT(LoadPolicy(text, "p.yaml"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("p.yaml:3:3: paths: 1001 path definitions; a policy may have at "
                                 "most 1000")));
}

TEST(PolicyLimitsTest, ThousandRulesAtTheLimitLoadInAboutASecondAtMost) {
  const std::string text = LabelRules(kMaxPolicyRules - 1);
  const absl::Time start = absl::Now();
  absl::StatusOr<std::shared_ptr<const Policy>> loaded = LoadPolicy(text, "p.yaml");
  const absl::Duration took = absl::Now() - start;
  ASSERT_THAT(loaded, IsOk());
  EXPECT_EQ((*loaded)->rules().size(), kMaxPolicyRules);
  EXPECT_LT(took, absl::Seconds(5));
}

TEST(PolicyLimitsTest, TotalityWorkPastTheBudgetIsRefused) {
  // 999 label rules that also name 4 cpu flags: 11 x 4 x 2^4 x 1001
  // abstract profiles (under the profile limit), most of them tested against
  // most rules.
  std::string flags;
  for (int i = 0; i < 4; ++i) absl::StrAppend(&flags, i ? ", " : "", "f", i);
  const std::string text = LabelRules(kMaxPolicyRules - 1, ", cpu_flags_none: [" + flags + "]");
  absl::StatusOr<PolicyDocument> document = ParsePolicyDocument(text, "p.yaml");
  ASSERT_THAT(document, IsOk());
  absl::StatusOr<CompiledRules> compiled = CompiledRules::Compile(document->rules, "p.yaml:4");
  ASSERT_THAT(compiled, IsOk());
  const absl::Time start = absl::Now();
  EXPECT_THAT(CheckTotality(*compiled, "p.yaml:4"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("p.yaml:4: policy too costly to check for totality"),
                             HasSubstr(absl::StrCat("more than ", kMaxTotalityRuleChecks,
                                                    " rule tests")))));
  // The budget is counted work, so this is the whole cost of a refusal.
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

TEST(PolicyLimitsTest, TotalityCountsItsWork) {
  absl::StatusOr<PolicyDocument> document = ParsePolicyDocument(LabelRules(3), "p.yaml");
  ASSERT_THAT(document, IsOk());
  absl::StatusOr<CompiledRules> compiled = CompiledRules::Compile(document->rules, "p.yaml:4");
  ASSERT_THAT(compiled, IsOk());
  absl::StatusOr<TotalityReport> report = CheckTotality(*compiled, "p.yaml:4");
  ASSERT_THAT(report, IsOk());
  // Label tier runs absent, another value, t0, t1, t2: the first two reach
  // the catch-all (4 tests), t<i> stops at rule i.
  const uint64_t per_fact_set = 4 + 4 + 1 + 2 + 3;
  EXPECT_EQ(report->profiles_checked % 5, 0u);
  EXPECT_EQ(report->rule_checks, report->profiles_checked / 5 * per_fact_set);
}

TEST(PolicyLimitsTest, AliasesOfALargeStringAreRefusedNamingTheExpansionLimit) {
  // ~1 MiB of text whose notes repeat a 1 MiB string 4000 times: 4 GB if
  // copied out.
  std::string text =
      "schema: 1\npaths:\n  - id: a\n    name: a\n    rationale: &big " +
      std::string(1 << 20, 'x') + "\n    notes:\n";
  for (int i = 0; i < 4000; ++i) text += "      - *big\n";
  text += "rules:\n  - {name: rest, path: a}\n";
  const absl::Time start = absl::Now();
  EXPECT_THAT(LoadPolicy(text, "p.yaml"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("p.yaml:"),
                             HasSubstr(absl::StrCat("more than ", kMaxPolicyBytes,
                                                    " bytes of text once aliases are expanded")),
                             HasSubstr("alias *big repeats 1048576 bytes"))));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST(PolicyLimitsTest, AliasesWithinTheLimitStillLoad) {
  std::string text = "schema: 1\npaths:\n  - id: a\n    name: a\n    rationale: &why shared\n"
                     "    notes: [*why, *why]\nrules:\n  - {name: rest, path: a}\n";
  absl::StatusOr<std::shared_ptr<const Policy>> loaded = LoadPolicy(text, "p.yaml");
  ASSERT_THAT(loaded, IsOk());
  EXPECT_THAT((*loaded)->paths()[0].notes, ::testing::ElementsAre("shared", "shared"));
}

TEST(PolicyLimitsTest, ErrorMessagesEscapeControlCharacters) {
  const std::string text = std::string(kHeader) + "  - {name: \"two\\nlines\", path: missing}\n";
  absl::StatusOr<std::shared_ptr<const Policy>> loaded = LoadPolicy(text, "p.yaml");
  ASSERT_THAT(loaded, StatusIs(absl::StatusCode::kInvalidArgument,
                               HasSubstr("rule 'two\\x0alines' points at undefined path id")));
}

TEST(PolicyLimitsTest, ACancelledLoadStopsPromptly) {
  std::string flags;
  for (int i = 0; i < 4; ++i) absl::StrAppend(&flags, i ? ", " : "", "f", i);
  const std::string text = LabelRules(kMaxPolicyRules - 1, ", cpu_flags_none: [" + flags + "]");
  std::atomic<bool> cancel{false};
  absl::Time cancelled_at;
  std::thread canceller([&] {
    absl::SleepFor(absl::Milliseconds(300));
    cancelled_at = absl::Now();
    cancel = true;
  });
  absl::StatusOr<std::shared_ptr<const Policy>> loaded = LoadPolicy(text, "p.yaml", &cancel);
  const absl::Time returned_at = absl::Now();
  canceller.join();
  EXPECT_THAT(loaded, StatusIs(absl::StatusCode::kCancelled, HasSubstr("p.yaml")));
  EXPECT_LT(returned_at - cancelled_at, absl::Milliseconds(200));
}

}  // namespace
}  // namespace weightpath::policy
