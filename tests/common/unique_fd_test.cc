// UniqueFd closes what it owns exactly once, hands ownership over on move and
// release, and never disturbs errno; ErrnoStatus names the call and maps the
// errno to the code a caller acts on.
#include "common/unique_fd.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace weightpath {
namespace {

using ::testing::Eq;
using ::testing::HasSubstr;
using ::weightpath::testing::StatusIs;

bool IsOpen(int fd) { return ::fcntl(fd, F_GETFD) != -1; }

int OpenDevNull() {
  const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  EXPECT_GE(fd, 0);
  return fd;
}

TEST(UniqueFdTest, ClosesOnDestruction) {
  const int fd = OpenDevNull();
  {
    UniqueFd owner(fd);
    EXPECT_TRUE(owner.valid());
    EXPECT_EQ(owner.get(), fd);
    EXPECT_TRUE(IsOpen(fd));
  }
  EXPECT_FALSE(IsOpen(fd));
}

TEST(UniqueFdTest, AFailedOpenOwnsNothing) {
  UniqueFd owner(::open("/nonexistent/weightpath-unique-fd", O_RDONLY | O_CLOEXEC));
  EXPECT_FALSE(owner.valid());
  EXPECT_EQ(owner.get(), -1);
  UniqueFd empty;
  EXPECT_FALSE(empty.valid());
}

TEST(UniqueFdTest, MoveHandsOwnershipOver) {
  const int fd = OpenDevNull();
  UniqueFd first(fd);
  UniqueFd second(std::move(first));
  EXPECT_FALSE(first.valid());  // NOLINT(bugprone-use-after-move): moved-from is defined empty
  EXPECT_EQ(second.get(), fd);

  const int other = OpenDevNull();
  UniqueFd third(other);
  third = std::move(second);  // closes `other`, takes `fd`
  EXPECT_FALSE(IsOpen(other));
  EXPECT_EQ(third.get(), fd);
  EXPECT_TRUE(IsOpen(fd));
  third = UniqueFd();
  EXPECT_FALSE(IsOpen(fd));
}

TEST(UniqueFdTest, ReleaseGivesUpWithoutClosing) {
  const int fd = OpenDevNull();
  {
    UniqueFd owner(fd);
    EXPECT_EQ(owner.release(), fd);
    EXPECT_FALSE(owner.valid());
  }
  EXPECT_TRUE(IsOpen(fd));
  ::close(fd);
}

TEST(UniqueFdTest, ResetClosesTheOldAndTakesTheNew) {
  const int first = OpenDevNull();
  const int second = OpenDevNull();
  UniqueFd owner(first);
  owner.reset(second);
  EXPECT_FALSE(IsOpen(first));
  EXPECT_EQ(owner.get(), second);
  owner.reset(second);  // the same descriptor again: kept, not closed
  EXPECT_TRUE(IsOpen(second));
  owner.reset();
  EXPECT_FALSE(IsOpen(second));
  EXPECT_FALSE(owner.valid());
}

TEST(UniqueFdTest, ClosingKeepsErrno) {
  UniqueFd owner(OpenDevNull());
  errno = ENOSPC;
  owner.reset();
  EXPECT_EQ(errno, ENOSPC);
  {
    UniqueFd scoped(OpenDevNull());
    errno = EIO;
  }
  EXPECT_EQ(errno, EIO);
}

TEST(ErrnoStatusTest, NamesTheCallAndMapsTheCode) {
  EXPECT_THAT(ErrnoStatus(ENOENT, "/etc/x: cannot open"),
              StatusIs(absl::StatusCode::kNotFound,
                       Eq("/etc/x: cannot open: No such file or directory")));
  EXPECT_THAT(ErrnoStatus(ENOTDIR, "a"), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(ErrnoStatus(EACCES, "a"), StatusIs(absl::StatusCode::kPermissionDenied,
                                                 HasSubstr("Permission denied")));
  EXPECT_THAT(ErrnoStatus(EPERM, "a"), StatusIs(absl::StatusCode::kPermissionDenied));
  EXPECT_THAT(ErrnoStatus(EEXIST, "a"), StatusIs(absl::StatusCode::kAlreadyExists));
  EXPECT_THAT(ErrnoStatus(EINVAL, "a"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ErrnoStatus(EIO, "b: read"),
              StatusIs(absl::StatusCode::kUnavailable, Eq("b: read: Input/output error")));
  EXPECT_THAT(ErrnoStatus(ENOSPC, "a"), StatusIs(absl::StatusCode::kUnavailable));
}

}  // namespace
}  // namespace weightpath
