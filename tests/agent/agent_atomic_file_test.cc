#include "agent/base/atomic_file.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/agent/temp_dir.h"
#include "tests/testing/status_matchers.h"

namespace weightpath::agent {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using testing::ReadTextFile;
using testing::TempDir;
using testing::WriteTextFile;
using weightpath::testing::IsOk;
using weightpath::testing::StatusIs;

int CountEntries(const std::string& directory) {
  int count = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(directory)) ++count;
  return count;
}

TEST(AgentAtomicFile, CreatesParentsAndLeavesNoTemporaryFile) {
  TempDir dir;
  const std::string path = dir.Sub("run/weightpath/decision.json");
  ASSERT_THAT(WriteFileAtomically(path, "{\"a\": 1}\n"), IsOk());
  EXPECT_EQ(ReadTextFile(path), "{\"a\": 1}\n");
  EXPECT_EQ(CountEntries(dir.Sub("run/weightpath")), 1);
  EXPECT_EQ(std::filesystem::status(path).permissions() & std::filesystem::perms::all,
            std::filesystem::perms(0644));
}

TEST(AgentAtomicFile, ReplacesTheWholeFile) {
  TempDir dir;
  const std::string path = dir.Sub("engine.env");
  WriteTextFile(path, std::string(4096, 'x'));
  ASSERT_THAT(WriteFileAtomically(path, "short\n"), IsOk());
  EXPECT_EQ(ReadTextFile(path), "short\n");
  EXPECT_EQ(CountEntries(dir.path()), 1);
}

// The process dies for real (SIGKILL) after the new contents are durable
// but before the rename: whoever reads the file next must see the old one,
// whole.
TEST(AgentAtomicFile, KillBetweenWriteAndRenameLeavesTheOldFile) {
  TempDir dir;
  const std::string path = dir.Sub("decision.json");
  const std::string old_contents = "{\"decision_source\": \"server\", \"old\": true}\n";
  WriteTextFile(path, old_contents);

  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    (void)WriteFileAtomically(path, std::string(1 << 20, 'n'), [] { ::raise(SIGKILL); });
    ::_exit(0);  // not reached
  }
  int wait_status = 0;
  ASSERT_EQ(::waitpid(child, &wait_status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(wait_status));
  EXPECT_EQ(WTERMSIG(wait_status), SIGKILL);
  EXPECT_EQ(ReadTextFile(path), old_contents);

  // The orphaned temporary file is a hidden sibling; a later write still
  // replaces the target cleanly.
  ASSERT_THAT(WriteFileAtomically(path, "new\n"), IsOk());
  EXPECT_EQ(ReadTextFile(path), "new\n");
}

TEST(AgentAtomicFile, UncreatableDirectoryIsAnInternalErrorNamingIt) {
  TempDir dir;
  WriteTextFile(dir.Sub("not-a-dir"), "file");
  EXPECT_THAT(WriteFileAtomically(dir.Sub("not-a-dir/decision.json"), "x"),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("not-a-dir")));
}

TEST(AgentAtomicFile, FailedRenameRemovesTheTemporaryFileAndKeepsTheTarget) {
  TempDir dir;
  // A directory in the way makes rename() fail after the data is written.
  std::filesystem::create_directories(dir.Sub("decision.json/occupied"));
  EXPECT_THAT(WriteFileAtomically(dir.Sub("decision.json"), "x"),
              StatusIs(absl::StatusCode::kInternal, StartsWith("cannot rename")));
  EXPECT_EQ(CountEntries(dir.path()), 1);
  EXPECT_TRUE(std::filesystem::is_directory(dir.Sub("decision.json/occupied")));
}

}  // namespace
}  // namespace weightpath::agent
