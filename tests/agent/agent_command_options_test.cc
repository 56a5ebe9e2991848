#include "agent/cli/command_options.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace weightpath::agent {
namespace {

using ::testing::HasSubstr;

// argv as the dispatcher passes it: the subcommand's name first.
absl::StatusOr<CommandOptions> Parse(std::vector<std::string> arguments) {
  arguments.insert(arguments.begin(), "cmd");
  std::vector<char*> argv;
  for (std::string& argument : arguments) argv.push_back(argument.data());
  return ParseCommandOptions(static_cast<int>(argv.size()), argv.data(), {"--config", "--root"},
                             {"--once"});
}

TEST(AgentCommandOptions, TakesSeparateAndInlineValuesAndFlags) {
  const absl::StatusOr<CommandOptions> options =
      Parse({"--config", "/etc/a.yaml", "--root=/mnt/device", "--once"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->Value("--config"), "/etc/a.yaml");
  EXPECT_EQ(options->ValueOr("--root", "/"), "/mnt/device");
  EXPECT_TRUE(options->Has("--once"));
  EXPECT_FALSE(options->help());
}

TEST(AgentCommandOptions, AbsentOptionsFallBack) {
  const absl::StatusOr<CommandOptions> options = Parse({});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->Value("--config"), std::nullopt);
  EXPECT_EQ(options->ValueOr("--root", "/"), "/");
  EXPECT_FALSE(options->Has("--once"));
}

TEST(AgentCommandOptions, AnInlineValueMayBeEmptyOrContainEquals) {
  const absl::StatusOr<CommandOptions> options = Parse({"--config=a=b", "--root="});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->Value("--config"), "a=b");
  EXPECT_EQ(options->Value("--root"), "");
}

TEST(AgentCommandOptions, UnknownArgumentIsNamed) {
  EXPECT_THAT(Parse({"--config", "a", "--bogus"}).status().message(),
              HasSubstr("unknown argument '--bogus'"));
  // A flag takes no value, so "--once=yes" is not the flag.
  EXPECT_THAT(Parse({"--once=yes"}).status().message(), HasSubstr("unknown argument '--once=yes'"));
}

TEST(AgentCommandOptions, MissingValueIsNamed) {
  const absl::StatusOr<CommandOptions> options = Parse({"--root"});
  EXPECT_EQ(options.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(options.status().message(), HasSubstr("--root needs a value"));
}

// The parser every command shares (common/command_line.h) refuses a second
// --config rather than keeping the last one.
TEST(AgentCommandOptions, ARepeatedOptionIsRefusedNamingIt) {
  const absl::StatusOr<CommandOptions> options =
      Parse({"--config", "/etc/a.yaml", "--config=/etc/b.yaml"});
  EXPECT_EQ(options.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(options.status().message(), HasSubstr("flag --config given twice"));
  EXPECT_THAT(Parse({"--once", "--once"}).status().message(), HasSubstr("flag --once given twice"));
}

TEST(AgentCommandOptions, HelpWinsOverEverythingElse) {
  for (const char* help : {"--help", "-h"}) {
    const absl::StatusOr<CommandOptions> options = Parse({"--bogus", help, "--root"});
    ASSERT_TRUE(options.ok()) << options.status();
    EXPECT_TRUE(options->help());
  }
}

}  // namespace
}  // namespace weightpath::agent
