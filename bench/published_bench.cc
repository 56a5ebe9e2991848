// What a reader of a published snapshot pays per call: Published<T>::Current()
// (a Pin on a thread-local copy, refreshed only when the generation moves:
// one atomic load) against the plain alternative, a shared_ptr copy taken under the
// mutex (Share()), and std::atomic_load of a shared_ptr, at 1, 2 and 4
// threads on the same instance. The cost that matters is per resolve, so
// the figures are read against the resolve handler's own cost (see
// bench/RESULTS-server.md). Run: build/bench/bench_published
#include <atomic>
#include <memory>
#include <string>

#include "benchmark/benchmark.h"
#include "server/config/published.h"

namespace weightpath::server {
namespace {

// Stands in for a policy snapshot: the readers touch one field of it.
struct Value {
  std::string version = "policy-2026-12-01";
  int generation = 1;
};

Published<Value>& Instance() {
  static Published<Value>* published = new Published<Value>(std::make_shared<const Value>());
  return *published;
}

std::shared_ptr<const Value>& AtomicSlot() {
  static std::shared_ptr<const Value>* slot =
      new std::shared_ptr<const Value>(std::make_shared<const Value>());
  return *slot;
}

void BM_PublishedCurrent(benchmark::State& state) {
  Published<Value>& published = Instance();
  for (auto _ : state) {
    const Published<Value>::Pin value = published.Current();
    benchmark::DoNotOptimize(value->generation);
  }
}
BENCHMARK(BM_PublishedCurrent)->Threads(1)->Threads(2)->Threads(4);

void BM_PublishedShare(benchmark::State& state) {
  Published<Value>& published = Instance();
  for (auto _ : state) {
    const std::shared_ptr<const Value> value = published.Share();
    benchmark::DoNotOptimize(value->generation);
  }
}
BENCHMARK(BM_PublishedShare)->Threads(1)->Threads(2)->Threads(4);

void BM_AtomicLoadSharedPtr(benchmark::State& state) {
  std::shared_ptr<const Value>& slot = AtomicSlot();
  for (auto _ : state) {
    const std::shared_ptr<const Value> value = std::atomic_load(&slot);
    benchmark::DoNotOptimize(value->generation);
  }
}
BENCHMARK(BM_AtomicLoadSharedPtr)->Threads(1)->Threads(2)->Threads(4);

}  // namespace
}  // namespace weightpath::server

BENCHMARK_MAIN();
