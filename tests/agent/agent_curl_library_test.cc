// libcurl loaded at run time: the agent binary has no link-time dependency
// on it, so these check that the on-demand load really yields a working API.
#include "agent/net/curl_library.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace weightpath::agent {
namespace {

using weightpath::testing::IsOk;

TEST(AgentCurlLibrary, LoadsOnceAndEveryEntryPointIsResolved) {
  absl::StatusOr<const CurlApi*> first = LoadCurl();
  ASSERT_THAT(first, IsOk());
  const CurlApi& api = **first;
  EXPECT_NE(api.easy_init, nullptr);
  EXPECT_NE(api.easy_setopt, nullptr);
  EXPECT_NE(api.easy_perform, nullptr);
  EXPECT_NE(api.easy_getinfo, nullptr);
  EXPECT_NE(api.easy_cleanup, nullptr);
  EXPECT_STREQ(api.easy_strerror(CURLE_OK), "No error");
  absl::StatusOr<const CurlApi*> second = LoadCurl();
  ASSERT_THAT(second, IsOk());
  EXPECT_EQ(*second, *first);
}

TEST(AgentCurlLibrary, AHandleTakesOptionsThroughTheLoadedLibrary) {
  absl::StatusOr<const CurlApi*> api = LoadCurl();
  ASSERT_THAT(api, IsOk());
  CURL* handle = (*api)->easy_init();
  ASSERT_NE(handle, nullptr);
  EXPECT_EQ((*api)->easy_setopt(handle, CURLOPT_URL, "file:///dev/null"), CURLE_OK);
  EXPECT_EQ((*api)->easy_perform(handle), CURLE_OK);
  long response_code = -1;
  EXPECT_EQ((*api)->easy_getinfo(handle, CURLINFO_RESPONSE_CODE, &response_code), CURLE_OK);
  EXPECT_EQ(response_code, 0);  // file:// has no status code
  (*api)->easy_cleanup(handle);
}

}  // namespace
}  // namespace weightpath::agent
