#include "common/host_port.h"

#include "gtest/gtest.h"

namespace weightpath {
namespace {

void ExpectSplit(absl::string_view address, absl::string_view host, absl::string_view port) {
  const HostPort split = SplitHostPort(address);
  EXPECT_EQ(split.host, host) << address;
  EXPECT_EQ(split.port, port) << address;
}

TEST(CommonHostPortTest, SplitsEverySpellingTheFlagsTake) {
  ExpectSplit("127.0.0.1:50051", "127.0.0.1", "50051");
  ExpectSplit("localhost:0", "localhost", "0");
  ExpectSplit("[::1]:9464", "::1", "9464");
  ExpectSplit("[::]:50051", "::", "50051");
  ExpectSplit(":50051", "", "50051");
  ExpectSplit("0.0.0.0:", "0.0.0.0", "");
  // No port: all host, as gRPC reads a bare IPv6 address.
  ExpectSplit("localhost", "localhost", "");
  ExpectSplit("::1", "::1", "");
  ExpectSplit("[::1]", "::1", "");
  ExpectSplit("[::1", "[::1", "");
}

TEST(CommonHostPortTest, WithPortKeepsTheHostAndBracketsIpv6) {
  EXPECT_EQ(WithPort("127.0.0.1:0", 41234), "127.0.0.1:41234");
  EXPECT_EQ(WithPort("localhost:0", 8), "localhost:8");
  EXPECT_EQ(WithPort("[::]:0", 41234), "[::]:41234");
  EXPECT_EQ(WithPort("[::1]:50051", 1), "[::1]:1");
  EXPECT_EQ(WithPort(":0", 5), ":5");
}

}  // namespace
}  // namespace weightpath
