// Local input files (configs, profiles, measurements, saved decisions) read
// the bounded, type-checked way.
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "absl/time/clock.h"
#include "agent/base/atomic_file.h"
#include "agent/base/local_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/agent/temp_dir.h"
#include "tests/testing/status_matchers.h"

namespace weightpath::agent {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing::TempDir;
using testing::WriteTextFile;
using weightpath::testing::IsOk;
using weightpath::testing::StatusIs;

TEST(AgentLocalFile, ReadsARegularFileWhole) {
  TempDir dir;
  WriteTextFile(dir.Sub("a.json"), "{\"x\": 1}\n");
  EXPECT_THAT(ReadLocalFile(dir.Sub("a.json"), "--file"), IsOk());
  EXPECT_EQ(*ReadLocalFile(dir.Sub("a.json"), "--file"), "{\"x\": 1}\n");
  WriteTextFile(dir.Sub("empty"), "");
  EXPECT_EQ(*ReadLocalFile(dir.Sub("empty"), "--file"), "");
}

// Read whole, /dev/zero never ends (bad_alloc); a FIFO blocks in open()
// until a writer comes. Both are refused at once, naming what they are.
TEST(AgentLocalFile, RefusesWhatIsNotARegularFileWithoutBlocking) {
  TempDir dir;
  ASSERT_EQ(::mkfifo(dir.Sub("fifo").c_str(), 0600), 0);
  const absl::Time start = absl::Now();
  EXPECT_THAT(
      ReadLocalFile(dir.Sub("fifo"), "--file"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               AllOf(HasSubstr("--file"), HasSubstr(dir.Sub("fifo")), HasSubstr("a FIFO"))));
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
  EXPECT_THAT(ReadLocalFile("/dev/zero", "config file"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("config file"), HasSubstr("a character device"))));
  EXPECT_THAT(ReadLocalFile(dir.path(), "--file"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("a directory")));
  // Through a symlink: what counts is what the descriptor is.
  ASSERT_EQ(::symlink("/dev/zero", dir.Sub("link").c_str()), 0);
  EXPECT_THAT(ReadLocalFile(dir.Sub("link"), "--file"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("a character device")));
}

TEST(AgentLocalFile, RefusesMoreThanTheLimit) {
  TempDir dir;
  WriteTextFile(dir.Sub("big"), std::string(1001, 'x'));
  EXPECT_THAT(ReadLocalFile(dir.Sub("big"), "--file", 1000),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("larger than the limit of 1000 bytes")));
  WriteTextFile(dir.Sub("exact"), std::string(1000, 'x'));
  EXPECT_THAT(ReadLocalFile(dir.Sub("exact"), "--file", 1000), IsOk());
  WriteTextFile(dir.Sub("huge"), std::string(kMaxLocalInputBytes + 1, 'x'));
  EXPECT_THAT(ReadLocalFile(dir.Sub("huge"), "--file"),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(AgentLocalFile, MissingAndUnreadableFilesHaveTheirOwnCodes) {
  TempDir dir;
  EXPECT_THAT(ReadLocalFile(dir.Sub("absent"), "--file"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr(dir.Sub("absent"))));
  if (::geteuid() != 0) {  // root reads anything
    WriteTextFile(dir.Sub("secret"), "x");
    ::chmod(dir.Sub("secret").c_str(), 0);
    EXPECT_THAT(ReadLocalFile(dir.Sub("secret"), "--file"),
                StatusIs(absl::StatusCode::kPermissionDenied));
  }
}

TEST(AgentTemporaryFiles, OnlyTheAgentsOwnNamingIsRecognised) {
  EXPECT_EQ(TemporaryFileTarget(".decision.json.tmp.AbC123"), "decision.json");
  EXPECT_EQ(TemporaryFileTarget(".engine.env.tmp.000000"), "engine.env");
  EXPECT_EQ(TemporaryFileTarget(".x.tmp.tmp.ABCDEF"), "x.tmp");
  for (const char* name :
       {"decision.json.tmp.AbC123", ".decision.json.tmp.AbC12", ".decision.json.tmp.AbC1234",
        ".decision.json.tmp.AbC-23", ".decision.json.tmp.", "..tmp.ABCDEF",
        ".decision.json.TMP.AbC123", ".decision.json"}) {
    EXPECT_EQ(TemporaryFileTarget(name), "") << name;
  }
}

}  // namespace
}  // namespace weightpath::agent
