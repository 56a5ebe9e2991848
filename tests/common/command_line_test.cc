#include "common/command_line.h"

#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace weightpath {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::weightpath::testing::StatusIs;

const std::vector<FlagSpec>& Specs() {
  static const std::vector<FlagSpec> specs = {
      {"config", '\0', true, "agent YAML config", false},
      {"output", 'o', true, "json or text", false},
      {"once", '\0', false, "one pass", false},
      {"label", 'l', true, "k=v, once per label", true},
  };
  return specs;
}

absl::StatusOr<ParsedArguments> Parse(const std::vector<std::string>& args) {
  return ParseArguments(args, Specs());
}

TEST(CommonCommandLine, TakesSeparateInlineAndAliasedValuesAndFlags) {
  absl::StatusOr<ParsedArguments> parsed =
      Parse({"--config", "/etc/a.yaml", "-o", "json", "--once"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->Value("config"), "/etc/a.yaml");
  EXPECT_EQ(parsed->Value("output"), "json");
  EXPECT_TRUE(parsed->Has("once"));
  EXPECT_FALSE(parsed->help());
  parsed = Parse({"--config=a=b", "--output="});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->Value("config"), "a=b");
  EXPECT_EQ(parsed->Value("output"), "");
  EXPECT_EQ(parsed->ValueOr("label", "none"), "none");
  EXPECT_FALSE(parsed->Has("once"));
}

// The one rule for a repeated flag: refused naming it, whether it is spelt
// the same way twice, with and without '=', or once through its alias.
TEST(CommonCommandLine, ARepeatedSingleValueFlagIsRefusedNamingIt) {
  EXPECT_THAT(Parse({"--config", "a.yaml", "--config", "b.yaml"}),
              StatusIs(absl::StatusCode::kInvalidArgument, "flag --config given twice"));
  EXPECT_THAT(Parse({"--config=a.yaml", "--config", "b.yaml"}),
              StatusIs(absl::StatusCode::kInvalidArgument, "flag --config given twice"));
  EXPECT_THAT(Parse({"-o", "json", "--output", "text"}),
              StatusIs(absl::StatusCode::kInvalidArgument, "flag --output given twice"));
  EXPECT_THAT(Parse({"--once", "--once"}),
              StatusIs(absl::StatusCode::kInvalidArgument, "flag --once given twice"));
}

TEST(CommonCommandLine, ARepeatableFlagKeepsEveryValueInOrder) {
  absl::StatusOr<ParsedArguments> parsed = Parse({"--label", "a=1", "-l", "b=2", "--label=c=3"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_THAT(parsed->Values("label"), ElementsAre("a=1", "b=2", "c=3"));
  EXPECT_THAT(parsed->Values("config"), IsEmpty());
}

TEST(CommonCommandLine, BadArgumentsAreNamed) {
  EXPECT_THAT(Parse({"--bogus"}), StatusIs(absl::StatusCode::kInvalidArgument,
                                           "unknown flag '--bogus'"));
  EXPECT_THAT(Parse({"stray"}), StatusIs(absl::StatusCode::kInvalidArgument,
                                         "unknown flag 'stray'"));
  EXPECT_THAT(Parse({"--config"}), StatusIs(absl::StatusCode::kInvalidArgument,
                                            "flag --config needs a value"));
  EXPECT_THAT(Parse({"--once=yes"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unknown flag '--once=yes'")));
  // What a program calls its arguments is its own word.
  EXPECT_THAT(ParseArguments({"--bogus"}, Specs(), "argument"),
              StatusIs(absl::StatusCode::kInvalidArgument, "unknown argument '--bogus'"));
}

TEST(CommonCommandLine, HelpWinsOverEverythingElse) {
  for (const char* help : {"--help", "-h"}) {
    absl::StatusOr<ParsedArguments> parsed = Parse({"--bogus", help, "--config"});
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_TRUE(parsed->help());
  }
}

TEST(CommonCommandLine, AUsageErrorIsOneLineOnStderrAndExitTwo) {
  std::ostringstream err;
  EXPECT_EQ(UsageError(err, "weightpath-agent boot", "--config FILE is required",
                       "usage: weightpath-agent boot --config FILE\n\nResolves...\n"),
            2);
  EXPECT_EQ(err.str(),
            "weightpath-agent boot: --config FILE is required; usage: weightpath-agent boot "
            "--config FILE\n");
  std::ostringstream bare;
  EXPECT_EQ(UsageError(bare, "weightpathctl resolve", "unknown flag '--x'"), kExitUsageError);
  EXPECT_EQ(bare.str(), "weightpathctl resolve: unknown flag '--x'\n");
}

TEST(CommonCommandLine, HelpGoesToStdoutWithZeroAndNoArgumentsToStderrWithTwo) {
  std::ostringstream out;
  EXPECT_EQ(ShowHelp(out, "usage: x\n"), 0);
  EXPECT_EQ(out.str(), "usage: x\n");
  std::ostringstream err;
  EXPECT_EQ(NoArguments(err, "usage: x\n"), kExitUsageError);
  EXPECT_EQ(err.str(), "usage: x\n");
}

TEST(CommonCommandLine, FlagHelpListsAliasesAndValues) {
  EXPECT_THAT(FlagHelp(Specs()), AllOf(HasSubstr("-o, --output VALUE"), HasSubstr("    --once  ")));
}

}  // namespace
}  // namespace weightpath
