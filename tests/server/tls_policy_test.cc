#include "server/security/tls.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace weightpath::server {
namespace {

using ::testing::HasSubstr;
using ::weightpath::testing::IsOk;
using ::weightpath::testing::StatusIs;

TEST(ServerTlsPolicyTest, LoopbackAddresses) {
  for (const char* address : {"127.0.0.1:50051", "127.1.2.3:0", "localhost:50051", "[::1]:50051",
                              "::1"}) {
    EXPECT_TRUE(IsLoopbackAddress(address)) << address;
  }
  for (const char* address : {"0.0.0.0:50051", "10.0.0.1:50051", "[::]:50051", "128.0.0.1:1",
                              "127.0.0.256:1", "example.com:50051", "127.0.0:1"}) {
    EXPECT_FALSE(IsLoopbackAddress(address)) << address;
  }
}

TEST(ServerTlsPolicyTest, PlaintextOffLoopbackNeedsInsecure) {
  ServerConfig config;
  config.listen = "0.0.0.0:50051";
  EXPECT_THAT(CheckTransportPolicy(config),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("--listen=0.0.0.0:50051")));
  config.insecure = true;
  EXPECT_THAT(CheckTransportPolicy(config), IsOk());
  config.insecure = false;
  config.tls_cert_path = "server.pem";
  config.tls_key_path = "server.key";
  EXPECT_THAT(CheckTransportPolicy(config), IsOk());
}

TEST(ServerTlsPolicyTest, UnreadableOrNonPemFilesNameTheFlag) {
  ServerConfig config;
  config.tls_cert_path = "/nonexistent/server.pem";
  config.tls_key_path = "/nonexistent/server.key";
  EXPECT_THAT(BuildServerCredentials(config).status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("--tls_cert")));
  config.tls_cert_path = WEIGHTPATH_SOURCE_DIR "/server/config/demo_catalog.yaml";
  EXPECT_THAT(BuildServerCredentials(config).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--tls_cert: ")));
}

}  // namespace
}  // namespace weightpath::server
