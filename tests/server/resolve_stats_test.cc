// Per-thread resolve counters summed at scrape time: every call recorded
// before a Collect is in it, from any number of threads, under the same
// names, labels and buckets the prometheus-cpp families had.
#include "server/observability/resolve_stats.h"

#include <map>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "policy/hardware_class.h"

namespace weightpath::server {
namespace {

std::map<std::string, double> CountsByLabels(const prometheus::MetricFamily& family) {
  std::map<std::string, double> counts;
  for (const prometheus::ClientMetric& metric : family.metric) {
    std::string labels;
    for (const auto& label : metric.label) labels += label.name + "=" + label.value + ",";
    counts[labels] = metric.counter.value;
  }
  return counts;
}

TEST(ResolveStatsTest, CountsFromManyThreadsAddUpExactly) {
  ResolveStats stats;
  ResolveSummary arm;
  arm.hardware_class = policy::HardwareClass::kArm64Cpu;
  arm.path_name = "w4a16-tinygemm";
  arm.effective_priority = v1::PRIORITY_FIDELITY;
  ResolveSummary arm_unchanged = arm;  // the same calls, answered "unchanged"
  arm_unchanged.unchanged = true;
  const ResolveSummary refused;  // not classified
  constexpr int kThreads = 6;
  constexpr int kCalls = 5000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kCalls; ++i) {
        if (i % 10 == 0) {
          stats.Record(refused, 3 /* INVALID_ARGUMENT */, 0.00002);
        } else {
          stats.Record(i % 10 == 5 ? arm_unchanged : arm, 0, t % 2 == 0 ? 0.0003 : 0.2);
        }
      }
    });
  }
  // A scrape while they run sees a consistent prefix and never crashes.
  for (int i = 0; i < 20; ++i) EXPECT_EQ(stats.Collect().size(), 3u);
  for (std::thread& thread : threads) thread.join();

  const std::vector<prometheus::MetricFamily> families = stats.Collect();
  ASSERT_EQ(families.size(), 3u);
  EXPECT_EQ(families[2].name, "weightpath_resolve_unchanged_total");
  ASSERT_EQ(families[2].metric.size(), 1u);
  EXPECT_EQ(families[2].metric[0].counter.value, kThreads * kCalls / 10);
  EXPECT_EQ(families[0].name, "weightpath_resolve_requests_total");
  EXPECT_EQ(families[0].type, prometheus::MetricType::Counter);
  const std::map<std::string, double> counts = CountsByLabels(families[0]);
  ASSERT_EQ(counts.size(), 2u);
  EXPECT_EQ(counts.at("code=OK,hardware_class=arm64_cpu,path=w4a16-tinygemm,priority=fidelity,"),
            kThreads * kCalls * 9 / 10);
  EXPECT_EQ(counts.at("code=INVALID_ARGUMENT,hardware_class=,path=,priority=,"),
            kThreads * kCalls / 10);

  const prometheus::MetricFamily& duration = families[1];
  EXPECT_EQ(duration.name, "weightpath_resolve_duration_seconds");
  EXPECT_EQ(duration.type, prometheus::MetricType::Histogram);
  ASSERT_EQ(duration.metric.size(), 1u);
  const auto& histogram = duration.metric[0].histogram;
  EXPECT_EQ(histogram.sample_count, static_cast<uint64_t>(kThreads * kCalls));
  ASSERT_EQ(histogram.bucket.size(), ResolveStats::kBucketBounds.size() + 1);
  // 0.00002 s falls in the first bucket (<= 25 µs); 0.0003 s in <= 0.5 ms;
  // 0.2 s only in +Inf.
  const uint64_t refused_calls = kThreads * kCalls / 10;
  const uint64_t fast_calls = (kThreads / 2) * kCalls * 9 / 10;
  EXPECT_EQ(histogram.bucket[0].cumulative_count, refused_calls);
  EXPECT_EQ(histogram.bucket[4].upper_bound, 0.0005);
  EXPECT_EQ(histogram.bucket[4].cumulative_count, refused_calls + fast_calls);
  EXPECT_EQ(histogram.bucket[11].cumulative_count, refused_calls + fast_calls);
  EXPECT_EQ(histogram.bucket.back().cumulative_count, histogram.sample_count);
  EXPECT_NEAR(histogram.sample_sum,
              refused_calls * 0.00002 + fast_calls * 0.0003 + fast_calls * 0.2, 1e-6);
}

TEST(ResolveStatsTest, TwoInstancesOnOneThreadKeepTheirOwnCounts) {
  // Two servers in one process share gRPC's threads.
  ResolveStats first;
  ResolveStats second;
  const ResolveSummary summary;
  first.Record(summary, 5, 0.001);
  second.Record(summary, 5, 0.001);
  second.Record(summary, 5, 0.001);
  EXPECT_EQ(first.Collect()[1].metric[0].histogram.sample_count, 1u);
  EXPECT_EQ(second.Collect()[1].metric[0].histogram.sample_count, 2u);
}

}  // namespace
}  // namespace weightpath::server
