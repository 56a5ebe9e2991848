// weightpath_resolve_requests_total, weightpath_resolve_duration_seconds and
// weightpath_resolve_unchanged_total, counted per thread and summed when
// Prometheus scrapes. prometheus-cpp's Histogram takes a mutex on every
// Observe and its counters are one shared atomic each; at tens of thousands
// of resolves a second on two cores, the handler threads then spend their
// time handing those cache lines and that lock back and forth. Here each
// thread writes only its own shard, and takes no lock to count: a shard's
// counts have one writer (its thread), so each is a plain load and store of
// an atomic, which a scrape reads. A lock is taken only when a thread first
// meets a label tuple (its series is added) and by scrapes, to walk the
// series. Every call recorded before a scrape began (its thread has finished
// Record, as a finished RPC has) is in that scrape.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"
#include "server/resolve/resolver.h"

namespace weightpath::server {

class ResolveStats final : public prometheus::Collectable {
 public:
  ResolveStats();
  ResolveStats(const ResolveStats&) = delete;
  ResolveStats& operator=(const ResolveStats&) = delete;

  // `code` is an absl/gRPC status code number (they share the numbering).
  void Record(const ResolveSummary& summary, int code, double seconds);

  std::vector<prometheus::MetricFamily> Collect() const override;

  // From 25 µs (a resolve on an idle server) to 100 ms (a wedged one).
  static constexpr std::array<double, 12> kBucketBounds = {
      0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001,
      0.0025,   0.005,   0.01,   0.025,   0.05,   0.1};

 private:
  // The label tuple; the view form finds a series without building strings.
  struct Key {
    int8_t hardware_class;  // -1: not classified
    std::string path;
    int8_t priority;
    int8_t code;
  };
  struct KeyView {
    int8_t hardware_class;
    absl::string_view path;
    int8_t priority;
    int8_t code;
  };
  struct KeyHash {
    using is_transparent = void;
    size_t operator()(const KeyView& key) const;
    size_t operator()(const Key& key) const { return (*this)(View(key)); }
  };
  struct KeyEq {
    using is_transparent = void;
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const {
      const KeyView x = View(a);
      const KeyView y = View(b);
      return x.hardware_class == y.hardware_class && x.priority == y.priority &&
             x.code == y.code && x.path == y.path;
    }
  };
  static KeyView View(const Key& key) { return {key.hardware_class, key.path, key.priority, key.code}; }
  static KeyView View(const KeyView& key) { return key; }

  // One label tuple's count on one thread.
  struct Series {
    Key key;
    std::atomic<uint64_t> calls{0};
  };

  struct Shard {
    // Taken by the shard's thread to add a series, and by scrapes to read
    // them; never to count.
    mutable absl::Mutex mutex;
    // Read without the lock by the shard's thread, the only one that
    // changes it.
    absl::flat_hash_map<Key, std::unique_ptr<Series>, KeyHash, KeyEq> series;
    // The shard's thread's last series: a thread mostly answers one kind of
    // call in a row, so this spares the hash of the path.
    Series* last = nullptr;
    std::array<std::atomic<uint64_t>, kBucketBounds.size() + 1> buckets = {};
    std::atomic<double> seconds_sum{0};
    std::atomic<uint64_t> unchanged{0};
  };

  // The shard's thread's lookup of `key`'s series when it is not the last
  // one, added on first use; it becomes the last one.
  static Series& SeriesFor(Shard& shard, const KeyView& key);
  Shard& ThreadShard();

  const uint64_t id_;  // tells this instance's shards apart in thread-local lookups
  mutable absl::Mutex shards_mutex_;
  // Shards live as long as the stats: a thread that ends leaves its counts.
  std::vector<std::unique_ptr<Shard>> shards_ ABSL_GUARDED_BY(shards_mutex_);
};

}  // namespace weightpath::server
