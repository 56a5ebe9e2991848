// The per-identity budget of refused calls the audit trail records.
#include "server/security/refusal_budget.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/agent/fake_clock.h"

namespace weightpath::server {
namespace {

using agent::testing::FakeClock;

RefusalBudget::Options Small() {
  RefusalBudget::Options options;
  options.per_second = 0.5;
  options.burst = 3;
  options.max_identities = 2;
  return options;
}

TEST(ServerRefusalBudgetTest, ABurstThenOneEveryTwoSecondsEachSayingHowManyWereLeftOut) {
  FakeClock clock;
  RefusalBudget budget(Small(), &clock);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(budget.Take("vera").record) << i;
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(budget.Take("vera").record) << i;
  // Another identity has a budget of its own.
  EXPECT_TRUE(budget.Take("otto").record);
  clock.Advance(absl::Seconds(2));
  const RefusalBudget::Decision next = budget.Take("vera");
  EXPECT_TRUE(next.record);
  EXPECT_EQ(next.left_out_before, 5u);
  EXPECT_FALSE(budget.Take("vera").record);
  clock.Advance(absl::Hours(1));  // refills to the burst, no further
  for (int i = 0; i < 3; ++i) {
    const RefusalBudget::Decision decision = budget.Take("vera");
    EXPECT_TRUE(decision.record) << i;
    EXPECT_EQ(decision.left_out_before, i == 0 ? 1u : 0u) << i;
  }
  EXPECT_FALSE(budget.Take("vera").record);
}

// Certificate identities can be varied by anyone holding one: the table is
// bounded, identities that owe nothing are forgotten to make room, and a
// newcomer while every entry is mid-flood is not recorded.
TEST(ServerRefusalBudgetTest, TheIdentityTableIsBounded) {
  FakeClock clock;
  RefusalBudget budget(Small(), &clock);
  for (const char* identity : {"a", "b"}) {
    for (int i = 0; i < 4; ++i) budget.Take(identity);  // each owes one
  }
  EXPECT_FALSE(budget.Take("c").record);
  clock.Advance(absl::Seconds(10));  // refilled, but "a" and "b" still owe their count
  EXPECT_FALSE(budget.Take("c").record);
  EXPECT_EQ(budget.Take("a").left_out_before, 1u);  // "a" now owes nothing
  clock.Advance(absl::Seconds(10));
  EXPECT_TRUE(budget.Take("c").record);  // "a" was forgotten to make room
}

}  // namespace
}  // namespace weightpath::server
