#include "server/observability/resolve_stats.h"

#include <algorithm>
#include <atomic>
#include <limits>
#include <map>
#include <tuple>

#include "absl/hash/hash.h"
#include "absl/status/status.h"
#include "policy/hardware_class.h"

namespace weightpath::server {
namespace {

std::atomic<uint64_t> next_stats_id{1};

std::string PriorityLabel(int8_t priority) {
  switch (priority) {
    case v1::PRIORITY_SPEED: return "speed";
    case v1::PRIORITY_FIDELITY: return "fidelity";
    default: return "";
  }
}

// For a counter that only its own thread writes: no read-modify-write
// instruction (no lock prefix) is needed, and a scrape reads a whole value.
void Add(std::atomic<uint64_t>& counter, uint64_t amount) {
  counter.store(counter.load(std::memory_order_relaxed) + amount, std::memory_order_relaxed);
}

}  // namespace

size_t ResolveStats::KeyHash::operator()(const KeyView& key) const {
  return absl::HashOf(key.hardware_class, key.path, key.priority, key.code);
}

ResolveStats::ResolveStats() : id_(next_stats_id.fetch_add(1)) {}

ResolveStats::Shard& ResolveStats::ThreadShard() {
  // Ids are never reused, so an entry of stats that no longer exist is
  // never looked up again.
  thread_local absl::flat_hash_map<uint64_t, Shard*> shards_of_thread;
  thread_local uint64_t last_id = 0;
  thread_local Shard* last_shard = nullptr;
  if (last_id == id_) return *last_shard;
  Shard*& shard = shards_of_thread[id_];
  if (shard == nullptr) {
    auto created = std::make_unique<Shard>();
    shard = created.get();
    absl::MutexLock lock(&shards_mutex_);
    shards_.push_back(std::move(created));
  }
  last_id = id_;
  last_shard = shard;
  return *shard;
}

ResolveStats::Series& ResolveStats::SeriesFor(Shard& shard, const KeyView& key) {
  auto it = shard.series.find(key);
  if (it == shard.series.end()) {
    // First call with this label tuple on this thread: the set is small and
    // bounded (classes x path names x priorities x codes).
    auto created = std::make_unique<Series>();
    created->key = Key{key.hardware_class, std::string(key.path), key.priority, key.code};
    absl::MutexLock lock(&shard.mutex);
    it = shard.series.emplace(created->key, std::move(created)).first;
  }
  shard.last = it->second.get();
  return *shard.last;
}

void ResolveStats::Record(const ResolveSummary& summary, int code, double seconds) {
  const KeyView key{
      static_cast<int8_t>(summary.hardware_class ? static_cast<int>(*summary.hardware_class) : -1),
      summary.path_name, static_cast<int8_t>(summary.effective_priority), static_cast<int8_t>(code)};
  const size_t bucket = static_cast<size_t>(
      std::lower_bound(kBucketBounds.begin(), kBucketBounds.end(), seconds) - kBucketBounds.begin());
  Shard& shard = ThreadShard();
  Series* series = shard.last;
  if (series == nullptr || !KeyEq()(series->key, key)) series = &SeriesFor(shard, key);
  Add(series->calls, 1);
  Add(shard.buckets[bucket], 1);
  shard.seconds_sum.store(shard.seconds_sum.load(std::memory_order_relaxed) + seconds,
                          std::memory_order_relaxed);
  if (summary.unchanged) Add(shard.unchanged, 1);
}

std::vector<prometheus::MetricFamily> ResolveStats::Collect() const {
  using LabelTuple = std::tuple<int8_t, std::string, int8_t, int8_t>;
  std::map<LabelTuple, uint64_t> calls;
  std::array<uint64_t, kBucketBounds.size() + 1> buckets = {};
  double seconds_sum = 0;
  uint64_t unchanged = 0;
  {
    absl::MutexLock shards_lock(&shards_mutex_);
    for (const std::unique_ptr<Shard>& shard : shards_) {
      absl::MutexLock lock(&shard->mutex);
      for (const auto& [key, series] : shard->series) {
        calls[{key.hardware_class, key.path, key.priority, key.code}] +=
            series->calls.load(std::memory_order_relaxed);
      }
      for (size_t i = 0; i < buckets.size(); ++i) {
        buckets[i] += shard->buckets[i].load(std::memory_order_relaxed);
      }
      seconds_sum += shard->seconds_sum.load(std::memory_order_relaxed);
      unchanged += shard->unchanged.load(std::memory_order_relaxed);
    }
  }

  prometheus::MetricFamily requests;
  requests.name = "weightpath_resolve_requests_total";
  requests.help = "ResolveWeightPath calls by hardware class, path, effective priority and gRPC status code";
  requests.type = prometheus::MetricType::Counter;
  for (const auto& [labels, count] : calls) {
    const auto& [hardware_class, path, priority, code] = labels;
    prometheus::ClientMetric metric;
    metric.label = {
        {"code", absl::StatusCodeToString(static_cast<absl::StatusCode>(code))},
        {"hardware_class",
         hardware_class < 0 ? std::string()
                            : std::string(policy::HardwareClassName(
                                  static_cast<policy::HardwareClass>(hardware_class)))},
        {"path", path},
        {"priority", PriorityLabel(priority)}};
    metric.counter.value = static_cast<double>(count);
    requests.metric.push_back(std::move(metric));
  }

  prometheus::MetricFamily duration;
  duration.name = "weightpath_resolve_duration_seconds";
  duration.help = "Time spent in the ResolveWeightPath handler, validation included";
  duration.type = prometheus::MetricType::Histogram;
  prometheus::ClientMetric histogram;
  uint64_t cumulative = 0;
  for (size_t i = 0; i < buckets.size(); ++i) {
    cumulative += buckets[i];
    prometheus::ClientMetric::Bucket bucket;
    bucket.cumulative_count = cumulative;
    bucket.upper_bound =
        i < kBucketBounds.size() ? kBucketBounds[i] : std::numeric_limits<double>::infinity();
    histogram.histogram.bucket.push_back(bucket);
  }
  histogram.histogram.sample_count = cumulative;
  histogram.histogram.sample_sum = seconds_sum;
  duration.metric.push_back(std::move(histogram));

  // Apart from the requests counter, so its label set stays as it was; it
  // exists at 0 from the start.
  prometheus::MetricFamily unchanged_answers;
  unchanged_answers.name = "weightpath_resolve_unchanged_total";
  unchanged_answers.help =
      "ResolveWeightPath calls answered \"unchanged\": the device already held the decision";
  unchanged_answers.type = prometheus::MetricType::Counter;
  prometheus::ClientMetric unchanged_metric;
  unchanged_metric.counter.value = static_cast<double>(unchanged);
  unchanged_answers.metric.push_back(std::move(unchanged_metric));
  return {std::move(requests), std::move(duration), std::move(unchanged_answers)};
}

}  // namespace weightpath::server
