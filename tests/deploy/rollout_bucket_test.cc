#include "deploy/rollout_bucket.h"

#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace weightpath::deploy {
namespace {

// The worked examples in deploy/README.md, computed there with sha256sum and
// bc; an offline tool following the README must land on the same buckets.
TEST(DeployRolloutBucketTest, MatchesTheDocumentedExample) {
  EXPECT_EQ(RolloutBucket("fidelity-agentic", "device-0001"), 8492u);
  EXPECT_EQ(RolloutBucket("fidelity-agentic", "device-0002"), 34u);
}

// The README is the contract for offline tools: its recipe must name the
// same input and result the library computes.
TEST(DeployRolloutBucketTest, TheReadmeStatesTheComputedExample) {
  std::ifstream readme(WEIGHTPATH_DEPLOY_README);
  ASSERT_TRUE(readme.is_open()) << WEIGHTPATH_DEPLOY_README;
  std::stringstream text;
  text << readme.rdbuf();
  EXPECT_NE(text.str().find("printf '%s' 'fidelity-agentic/device-0001' | sha256sum"),
            std::string::npos);
  EXPECT_NE(text.str().find(absl::StrCat("# ", RolloutBucket("fidelity-agentic", "device-0001"),
                                         ": device-0001 joins")),
            std::string::npos);
  EXPECT_NE(text.str().find(absl::StrCat("device-0002 prints ",
                                         RolloutBucket("fidelity-agentic", "device-0002"))),
            std::string::npos);
}

TEST(DeployRolloutBucketTest, IsDeterministicAndDependsOnBothIds) {
  EXPECT_EQ(RolloutBucket("r1", "device-42"), RolloutBucket("r1", "device-42"));
  EXPECT_NE(RolloutBucket("r1", "device-42"), RolloutBucket("r2", "device-42"));
}

TEST(DeployRolloutBucketTest, StaysInRangeAndSpreadsEvenly) {
  constexpr int kDevices = 20000;
  int below_ten_percent = 0;
  for (int i = 0; i < kDevices; ++i) {
    uint32_t bucket = RolloutBucket("spread", absl::StrCat("device-", i));
    ASSERT_LT(bucket, kBucketCount);
    if (BucketWithinPercent(bucket, 10)) ++below_ten_percent;
  }
  // 10% of 20000 is 2000; the binomial standard deviation is about 42.
  EXPECT_NEAR(below_ten_percent, 2000, 200);
}

TEST(DeployRolloutBucketTest, RaisingThePercentOnlyAddsDevices) {
  for (uint32_t bucket : {0u, 99u, 100u, 999u, 4999u, 9999u}) {
    bool was_member = false;
    for (uint32_t percent = 1; percent <= 100; ++percent) {
      bool member = BucketWithinPercent(bucket, percent);
      EXPECT_TRUE(member || !was_member) << "bucket " << bucket << " left at " << percent << "%";
      was_member = member;
    }
    EXPECT_TRUE(was_member) << "100% must include bucket " << bucket;
  }
  EXPECT_TRUE(BucketWithinPercent(99, 1));
  EXPECT_FALSE(BucketWithinPercent(100, 1));
}

}  // namespace
}  // namespace weightpath::deploy
