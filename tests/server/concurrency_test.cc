// The server's shared state under real concurrency, in-process and without
// gRPC, so that ThreadSanitizer can watch every access (scripts/test runs
// this suite under TSan as well as in the plain build):
//  - Published<T>: readers on their thread-local copies while writers
//    Publish and Update;
//  - reload under load: the watcher's thread polling and reloading a policy
//    that changes every few milliseconds, SIGHUP-style requests arriving
//    meanwhile, resolvers deciding against the published snapshot through
//    the per-thread decided-part cache, and a scraper reading the metrics.
// Each reader checks that what it sees is whole (never half of one value
// and half of another) and that it does see the writers' progress.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "policy/policy.h"
#include "prometheus/text_serializer.h"
#include "server/config_watcher.h"
#include "server/config/demo_catalog.h"
#include "server/observability/metrics.h"
#include "server/config/policy_snapshot.h"
#include "server/config/published.h"
#include "server/resolve/resolver.h"
#include "server/wire/response_cache.h"
#include "tests/server/server_process.h"

namespace weightpath::server {
namespace {

struct Pair {
  uint64_t serial = 0;
  uint64_t twice = 0;  // always 2 * serial: a torn read would show
  std::vector<uint64_t> payload;  // serial repeated, freed when replaced
};

std::shared_ptr<const Pair> MakePair(uint64_t serial) {
  auto pair = std::make_shared<Pair>();
  pair->serial = serial;
  pair->twice = 2 * serial;
  pair->payload.assign(16, serial);
  return pair;
}

// A Pin keeps its value for as long as it lives, whatever else the thread
// reads meanwhile: another instance of the same type (which shares the
// thread's copy), or the same instance after a publish.
TEST(ServerConcurrencyTest, APinKeepsItsValueWhileTheThreadReadsOtherValues) {
  Published<std::string> first(std::make_shared<const std::string>("first"));
  Published<std::string> second(std::make_shared<const std::string>("second"));
  const Published<std::string>::Pin held = first.Current();
  {
    const Published<std::string>::Pin other = second.Current();
    EXPECT_EQ(*other, "second");
    EXPECT_EQ(*held, "first");
  }
  first.Publish(std::make_shared<const std::string>("first, again"));
  {
    const Published<std::string>::Pin newer = first.Current();
    EXPECT_EQ(*newer, "first, again");
    EXPECT_EQ(*held, "first") << "a publish must not move a pinned value";
  }
  const Published<std::string>::Pin same = second.Current();
  EXPECT_EQ(*same, "second");
  EXPECT_EQ(*held, "first");
}

TEST(ServerConcurrencyTest, UnpinnedReadsOfTheSameGenerationShareTheThreadCopy) {
  Published<std::string> published(std::make_shared<const std::string>("value"));
  const std::string* seen = published.Current().get();
  EXPECT_EQ(published.Current().get(), seen) << "no new reference while nothing changed";
  std::string forever = "static";
  EXPECT_EQ(Published<std::string>::Pin::Of(forever).get(), &forever);
}

TEST(ServerConcurrencyTest, PublishedReadersSeeWholeValuesWhileWritersReplaceThem) {
  Published<Pair> published(MakePair(0));
  constexpr uint64_t kPublishes = 3000;
  std::atomic<bool> done{false};
  std::atomic<uint64_t> torn{0};
  std::vector<std::thread> readers;
  std::vector<uint64_t> last_seen(4, 0);
  for (int r = 0; r < 4; ++r) {
    readers.emplace_back([&, r] {
      uint64_t highest = 0;
      auto check = [&] {
        const auto pinned_pair = published.Current();
        const Pair& pair = *pinned_pair;
        if (pair.twice != 2 * pair.serial || pair.payload.size() != 16 ||
            pair.payload.back() != pair.serial) {
          torn.fetch_add(1);
        }
        highest = std::max(highest, pair.serial);
        if (r % 2 == 1) {
          // A reference kept past the next Current(), as long-lived work
          // takes one.
          std::shared_ptr<const Pair> shared = published.Share();
          if (shared->twice != 2 * shared->serial) torn.fetch_add(1);
        }
      };
      while (!done.load(std::memory_order_acquire)) check();
      check();  // once more after the writers: the last value must be seen
      last_seen[r] = highest;
    });
  }
  std::thread publisher([&] {
    for (uint64_t serial = 1; serial <= kPublishes; ++serial) {
      if (serial % 2 == 0) {
        published.Publish(MakePair(serial));
      } else {
        published.Update([&](const std::shared_ptr<const Pair>& current) {
          return current->serial < serial ? MakePair(serial) : nullptr;
        });
      }
    }
  });
  publisher.join();
  done.store(true, std::memory_order_release);
  for (std::thread& reader : readers) reader.join();
  EXPECT_EQ(torn.load(), 0u);
  for (uint64_t seen : last_seen) EXPECT_EQ(seen, kPublishes);
}

class ServerReloadUnderLoadTest : public ::testing::Test {
 protected:
  ServerReloadUnderLoadTest()
      : policy_path_(dir_.File("policy.yaml")),
        catalog_path_(dir_.File("catalog.yaml")),
        metrics_(std::make_shared<prometheus::Registry>()) {
    testing::WriteFileOrDie(policy_path_, PolicyText(0));
    testing::WriteFileOrDie(catalog_path_, testing::SingleFileCatalogYaml());
  }

  // The bundled policy with a comment that changes its version.
  static std::string PolicyText(int edition) {
    return absl::StrCat(std::string(policy::DefaultPolicyYaml()), "\n# edition ", edition, "\n");
  }

  void Replace(const std::string& path, const std::string& contents) {
    testing::WriteFileOrDie(path + ".new", contents);
    ASSERT_EQ(std::rename((path + ".new").c_str(), path.c_str()), 0);
  }

  testing::TempDir dir_;
  const std::string policy_path_;
  const std::string catalog_path_;
  ServerMetrics metrics_;
  SnapshotHolder holder_;
};

TEST_F(ServerReloadUnderLoadTest, ResolvesStayWholeWhileThePolicyChangesUnderThem) {
  ConfigWatcher watcher({policy_path_, catalog_path_}, &holder_, &metrics_, absl::Milliseconds(1));
  ASSERT_TRUE(watcher.LoadInitial().ok());
  watcher.Start();

  v1::ResolveWeightPathRequest request;
  request.set_device_id("edge-1");
  request.mutable_profile()->set_arch("x86_64");
  request.mutable_profile()->set_accelerator("none");
  request.mutable_profile()->add_cpu_flags("amx_tile");
  request.mutable_profile()->set_supports_bf16(true);

  std::atomic<bool> done{false};
  std::atomic<uint64_t> failures{0};
  absl::Mutex versions_mutex;
  std::set<std::string> versions_seen;
  std::vector<std::thread> resolvers;
  for (int r = 0; r < 3; ++r) {
    resolvers.emplace_back([&] {
      std::set<std::string> seen;
      while (!done.load(std::memory_order_acquire)) {
        const auto pinned_snapshot = holder_.Current();
        const Snapshot& snapshot = *pinned_snapshot;
        ResolveSummary summary;
        absl::StatusOr<ResolvedDecision> decision = Decide(request, snapshot, &summary);
        if (!decision.ok()) {
          failures.fetch_add(1);
          continue;
        }
        const DecidedPart& decided = ThreadDecidedPartCache().Find(holder_, snapshot, *decision);
        // The cached part belongs to the snapshot this call decided with.
        if (decided.message.policy_version() != snapshot.policy->version() ||
            decided.message.weight_path().name() != "w4a8-amx") {
          failures.fetch_add(1);
        }
        seen.insert(snapshot.policy->version());
      }
      absl::MutexLock lock(&versions_mutex);
      versions_seen.insert(seen.begin(), seen.end());
    });
  }
  std::thread scraper([&] {
    while (!done.load(std::memory_order_acquire)) {
      (void)prometheus::TextSerializer().Serialize(metrics_.registry()->Collect());
      absl::SleepFor(absl::Milliseconds(1));
    }
  });

  constexpr int kEditions = 40;
  for (int edition = 1; edition <= kEditions; ++edition) {
    Replace(policy_path_, PolicyText(edition));
    if (edition % 3 == 0) watcher.RequestReload();  // SIGHUP on top of polling
    absl::SleepFor(absl::Milliseconds(5));
  }
  // The last edition is served once the watcher has caught up.
  const std::string last = policy::LoadPolicy(PolicyText(kEditions), policy_path_).value()->version();
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  while (holder_.Share()->policy->version() != last && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  done.store(true, std::memory_order_release);
  for (std::thread& resolver : resolvers) resolver.join();
  scraper.join();
  watcher.Stop();

  EXPECT_EQ(failures.load(), 0u);
  EXPECT_EQ(holder_.Share()->policy->version(), last);
  // Readers went through several editions, not just the first and last.
  absl::MutexLock lock(&versions_mutex);
  EXPECT_GE(versions_seen.size(), 3u);
}

}  // namespace
}  // namespace weightpath::server
