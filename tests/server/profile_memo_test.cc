// ProfileMemo on its own: hits and misses, bytes compared where hashes
// collide, the fields a probe re-measures, epochs across a reload, the memory
// bound, and many threads at once.
#include "server/resolve/profile_memo.h"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "policy/policy.h"
#include "policy/profile_json.h"
#include "tests/server/server_process.h"

namespace weightpath::server {
namespace {

// Stand-ins for a policy's paths: a decision is told apart by its path.
policy::PathDefinition kPaths[64];

policy::Decision DecisionFor(int path, v1::Priority priority = v1::PRIORITY_SPEED) {
  policy::Decision decision;
  decision.hardware_class = policy::HardwareClass::kX86Cpu;
  decision.path = &kPaths[path];
  decision.effective_priority = priority;
  return decision;
}

v1::HardwareProfile ExampleProfile(const std::string& name) {
  absl::StatusOr<v1::HardwareProfile> profile = policy::ParseProfileJson(
      testing::ReadFileOrDie(absl::StrCat(WEIGHTPATH_SOURCE_DIR, "/examples/profiles/", name)), name);
  EXPECT_TRUE(profile.ok()) << profile.status();
  return profile.ok() ? *profile : v1::HardwareProfile();
}

std::string Bytes(const v1::HardwareProfile& profile) { return profile.SerializeAsString(); }

uint64_t SameHashForAll(absl::string_view) { return 42; }

constexpr uint64_t kEpoch = 7;

TEST(ResolveProfileMemoTest, AHitGivesTheDecisionKeptForThatPriority) {
  ProfileMemo memo;
  const std::string profile = Bytes(ExampleProfile("intel-sapphire-rapids.json"));
  policy::Decision found;
  EXPECT_FALSE(memo.Find(profile, kEpoch, v1::PRIORITY_SPEED, &found));
  ASSERT_TRUE(memo.Remember(profile, kEpoch, DecisionFor(1, v1::PRIORITY_SPEED),
                            DecisionFor(2, v1::PRIORITY_FIDELITY)));
  ASSERT_TRUE(memo.Find(profile, kEpoch, v1::PRIORITY_SPEED, &found));
  EXPECT_EQ(found.path, &kPaths[1]);
  ASSERT_TRUE(memo.Find(profile, kEpoch, v1::PRIORITY_UNSPECIFIED, &found));
  EXPECT_EQ(found.path, &kPaths[1]);
  ASSERT_TRUE(memo.Find(profile, kEpoch, v1::PRIORITY_FIDELITY, &found));
  EXPECT_EQ(found.path, &kPaths[2]);
  EXPECT_EQ(found.effective_priority, v1::PRIORITY_FIDELITY);
  EXPECT_EQ(memo.size(), 1u);

  // Remembering it again replaces the entry, never adds a second.
  ASSERT_TRUE(memo.Remember(profile, kEpoch, DecisionFor(3), DecisionFor(4)));
  EXPECT_EQ(memo.size(), 1u);
  ASSERT_TRUE(memo.Find(profile, kEpoch, v1::PRIORITY_SPEED, &found));
  EXPECT_EQ(found.path, &kPaths[3]);
}

TEST(ResolveProfileMemoTest, OtherProfilesAndOtherEpochsMiss) {
  ProfileMemo memo;
  const std::string amx = Bytes(ExampleProfile("intel-sapphire-rapids.json"));
  const std::string jetson = Bytes(ExampleProfile("jetson-agx-orin.json"));
  ASSERT_TRUE(memo.Remember(amx, kEpoch, DecisionFor(1), DecisionFor(2)));
  policy::Decision found;
  EXPECT_FALSE(memo.Find(jetson, kEpoch, v1::PRIORITY_SPEED, &found));
  EXPECT_FALSE(memo.Find(amx, kEpoch + 1, v1::PRIORITY_SPEED, &found));
  EXPECT_FALSE(memo.Find(amx, 0, v1::PRIORITY_SPEED, &found));
  EXPECT_FALSE(memo.Find(amx.substr(0, amx.size() - 1), kEpoch, v1::PRIORITY_SPEED, &found));
  EXPECT_FALSE(memo.Find(amx + amx.substr(0, 2), kEpoch, v1::PRIORITY_SPEED, &found));
  EXPECT_FALSE(memo.Find("", kEpoch, v1::PRIORITY_SPEED, &found));
  EXPECT_FALSE(memo.Remember(amx, 0, DecisionFor(1), DecisionFor(2)));
}

// The default hash spreads profiles that differ only in their CPU model (a
// fleet of one arch) over the sets: a hundred of them, in 256 sets of 4
// ways, are nearly all kept at once; short prefixes (under a word, or not a
// whole number of words) hash too.
TEST(ResolveProfileMemoTest, TheDefaultHashSpreadsOneArchsProfilesOverTheSets) {
  ProfileMemo memo;
  std::vector<std::string> profiles;
  for (int i = 0; i < 100; ++i) {
    v1::HardwareProfile profile = ExampleProfile("intel-sapphire-rapids.json");
    profile.set_cpu_model(absl::StrCat("Intel(R) Xeon(R) Platinum 84", i, "C"));
    profiles.push_back(Bytes(profile));
    ASSERT_TRUE(memo.Remember(profiles.back(), kEpoch, DecisionFor(i % 64), DecisionFor(i % 64)));
  }
  int found_count = 0;
  for (int i = 0; i < 100; ++i) {
    policy::Decision found;
    if (memo.Find(profiles[static_cast<size_t>(i)], kEpoch, v1::PRIORITY_SPEED, &found)) {
      ++found_count;
      EXPECT_EQ(found.path, &kPaths[i % 64]);
    }
  }
  // Five in one set (one evicted) is already unlikely; more would mean
  // a hash that leaves most sets empty.
  EXPECT_GE(found_count, 95);

  for (const char* arch : {"", "a", "aarch64", "x86_64ab", "riscv64gc-long"}) {
    v1::HardwareProfile tiny;
    tiny.set_arch(arch);
    const std::string bytes = Bytes(tiny);
    policy::Decision found;
    ASSERT_TRUE(memo.Remember(bytes, kEpoch + 1, DecisionFor(5), DecisionFor(6)) || bytes.empty());
    if (!bytes.empty()) {
      EXPECT_TRUE(memo.Find(bytes, kEpoch + 1, v1::PRIORITY_FIDELITY, &found));
    }
  }
}

// With every profile hashed alike, only the bytes tell entries apart: a
// profile one flag away from a kept one gets nothing of it.
TEST(ResolveProfileMemoTest, TheSameHashWithOtherBytesIsAMiss) {
  ProfileMemo memo(ProfileMemo::Options{.sets = 1, .hash = SameHashForAll});
  v1::HardwareProfile original = ExampleProfile("intel-sapphire-rapids.json");
  v1::HardwareProfile lookalike = original;
  ASSERT_GT(lookalike.cpu_flags_size(), 100);
  // Same length, one byte off, deep in the flag list.
  std::string& flag = *lookalike.mutable_cpu_flags(100);
  flag.back() = flag.back() == 'x' ? 'y' : 'x';
  const std::string a = Bytes(original);
  const std::string b = Bytes(lookalike);
  ASSERT_EQ(a.size(), b.size());
  ASSERT_NE(a, b);

  ASSERT_TRUE(memo.Remember(a, kEpoch, DecisionFor(1), DecisionFor(1)));
  policy::Decision found;
  EXPECT_FALSE(memo.Find(b, kEpoch, v1::PRIORITY_SPEED, &found));
  ASSERT_TRUE(memo.Remember(b, kEpoch, DecisionFor(2), DecisionFor(2)));
  ASSERT_TRUE(memo.Find(a, kEpoch, v1::PRIORITY_SPEED, &found));
  EXPECT_EQ(found.path, &kPaths[1]);
  ASSERT_TRUE(memo.Find(b, kEpoch, v1::PRIORITY_SPEED, &found));
  EXPECT_EQ(found.path, &kPaths[2]);
  EXPECT_EQ(memo.size(), 2u);
}

// Free RAM changes from probe to probe (and its varint may grow or shrink
// with it); every other byte, the fields validation or the policy reads
// above all, must be the same.
TEST(ResolveProfileMemoTest, OnlyFreeRamMayDiffer) {
  ProfileMemo memo(ProfileMemo::Options{.sets = 1, .hash = SameHashForAll});
  v1::HardwareProfile kept = ExampleProfile("intel-sapphire-rapids.json");
  kept.set_ram_available_bytes(24'364'072'960);
  kept.set_thermal_zones(3);
  ASSERT_TRUE(memo.Remember(Bytes(kept), kEpoch, DecisionFor(1), DecisionFor(1)));
  policy::Decision found;

  for (const uint64_t free_bytes : {uint64_t{200}, uint64_t{1} << 40, uint64_t{24'364'072'961}}) {
    v1::HardwareProfile reprobed = kept;
    reprobed.set_ram_available_bytes(free_bytes);  // 5 bytes of varint -> 2, 6, 5
    EXPECT_TRUE(memo.Find(Bytes(reprobed), kEpoch, v1::PRIORITY_SPEED, &found)) << free_bytes;
  }

  auto expect_miss = [&](const v1::HardwareProfile& profile, const char* what) {
    EXPECT_FALSE(memo.Find(Bytes(profile), kEpoch, v1::PRIORITY_SPEED, &found)) << what;
  };
  v1::HardwareProfile changed = kept;
  changed.set_ram_available_bytes(0);  // the field leaves the wire
  expect_miss(changed, "ram_available_bytes absent");
  changed = kept;
  changed.set_ram_total_bytes(kept.ram_total_bytes() + 4096);
  expect_miss(changed, "ram_total_bytes");
  changed = kept;
  changed.set_n_logical(kept.n_logical() + 1);
  expect_miss(changed, "n_logical");
  changed = kept;
  changed.set_thermal_zones(4);
  expect_miss(changed, "thermal_zones");
  changed = kept;
  changed.set_supports_bf16(!kept.supports_bf16());
  expect_miss(changed, "supports_bf16 (the policy reads it)");
  changed = kept;
  changed.set_arch("aarch64");
  expect_miss(changed, "arch");
  changed = kept;
  changed.set_accelerator("cuda_discrete");
  expect_miss(changed, "accelerator");
  changed = kept;
  changed.add_cpu_flags("amx_fp16");
  expect_miss(changed, "one more flag");
  changed = kept;
  changed.add_probe_notes("a note");
  expect_miss(changed, "probe_notes (bounded by validation)");
  changed = kept;
  changed.add_gpu_capability(8);
  expect_miss(changed, "gpu_capability (counted by validation)");

  // A skipped field's value must still be one varint protobuf reads: 11
  // bytes of continuation is malformed, so no verdict for it.
  const std::string bytes = Bytes(kept);
  v1::HardwareProfile ram_only;
  ram_only.set_ram_available_bytes(kept.ram_available_bytes());
  const std::string ram_field = Bytes(ram_only);  // its tag, then its varint
  const size_t at = bytes.find(ram_field);
  ASSERT_NE(at, std::string::npos);
  auto with_value = [&](const std::string& varint) {
    return bytes.substr(0, at + 1) + varint + bytes.substr(at + ram_field.size());
  };
  EXPECT_FALSE(memo.Find(with_value(std::string(10, '\xff') + "\x01"), kEpoch,
                         v1::PRIORITY_SPEED, &found));
  // 2^63, the largest value in ten bytes, is read alike everywhere.
  EXPECT_TRUE(
      memo.Find(with_value(std::string(9, '\x80') + "\x01"), kEpoch, v1::PRIORITY_SPEED, &found));
  const std::string ten_bytes_over = with_value(std::string(9, '\x80') + "\x02");  // past 64 bits
  EXPECT_FALSE(memo.Find(ten_bytes_over, kEpoch, v1::PRIORITY_SPEED, &found));
}

// An agent's probe of a small VM: its first bytes hold the skipped fields
// too, so the set is picked before them, and a changed RAM figure still hits.
TEST(ResolveProfileMemoTest, ARemeasuredFieldInTheFirstBytesStillHits) {
  ProfileMemo memo;
  v1::HardwareProfile kept;
  kept.set_arch("x86_64");
  kept.set_n_logical(2);
  kept.set_ram_available_bytes(1'000'000);
  kept.set_accelerator("none");
  ASSERT_TRUE(memo.Remember(Bytes(kept), kEpoch, DecisionFor(1), DecisionFor(1)));
  v1::HardwareProfile later = kept;
  later.set_ram_available_bytes(999'000);
  policy::Decision found;
  EXPECT_TRUE(memo.Find(Bytes(later), kEpoch, v1::PRIORITY_SPEED, &found));
}

TEST(ResolveProfileMemoTest, EachReloadIsANewEpochAndAStaleSnapshotGetsNone) {
  ProfileMemo memo;
  SnapshotHolder holder;
  auto first = std::make_shared<Snapshot>(Snapshot{policy::DefaultPolicy(), nullptr, ""});
  holder.Publish(first);
  const ProfileMemo::Epoch epoch1 = memo.EpochFor(holder, *holder.Current());
  EXPECT_NE(epoch1.id, 0u);
  EXPECT_FALSE(epoch1.policy_reads_labels);
  EXPECT_EQ(memo.EpochFor(holder, *holder.Current()).id, epoch1.id);  // steady

  const std::string profile = Bytes(ExampleProfile("intel-sapphire-rapids.json"));
  ASSERT_TRUE(memo.Remember(profile, epoch1.id, DecisionFor(1), DecisionFor(1)));

  // A reload, even to the same policy text: a new epoch, and the entry of
  // the old one is not used for it.
  auto second = std::make_shared<Snapshot>(Snapshot{policy::DefaultPolicy(), nullptr, ""});
  holder.Publish(second);
  const ProfileMemo::Epoch epoch2 = memo.EpochFor(holder, *holder.Current());
  EXPECT_GT(epoch2.id, epoch1.id);
  policy::Decision found;
  EXPECT_FALSE(memo.Find(profile, epoch2.id, v1::PRIORITY_SPEED, &found));
  // A call still holding the first snapshot (a reload raced it) is not
  // memoised at all.
  EXPECT_EQ(memo.EpochFor(holder, *first).id, 0u);
  // Nor is one that decides against a snapshot never published.
  Snapshot stray{policy::DefaultPolicy(), nullptr, ""};
  EXPECT_EQ(memo.EpochFor(holder, stray).id, 0u);
  EXPECT_EQ(memo.EpochFor(holder, *holder.Current()).id, epoch2.id);

  // A policy whose rules test labels decides on more than the profile.
  constexpr char kLabelPolicy[] = R"(schema: 1
paths:
  - {id: fast, name: w4a8-amx, quantization: gptq, group_size: 128, bits_per_weight: 4.25, rationale: fast}
  - {id: faithful, name: w4a16-tinygemm, quantization: cpu_int4, group_size: 128, bits_per_weight: 4.25, rationale: faithful}
rules:
  - name: agentic-wants-fidelity
    match: {labels: {workload: agentic}}
    path: faithful
  - name: rest
    path: fast
)";
  absl::StatusOr<std::shared_ptr<const policy::Policy>> label_policy =
      policy::LoadPolicy(kLabelPolicy, "labels.yaml");
  ASSERT_TRUE(label_policy.ok()) << label_policy.status();
  holder.Publish(std::make_shared<Snapshot>(Snapshot{*label_policy, nullptr, ""}));
  const ProfileMemo::Epoch epoch3 = memo.EpochFor(holder, *holder.Current());
  EXPECT_GT(epoch3.id, epoch2.id);
  EXPECT_TRUE(epoch3.policy_reads_labels);
}

TEST(ResolveProfileMemoTest, MemoryIsFixedAtConstructionWhateverIsKept) {
  ProfileMemo memo;
  const size_t bound = ProfileMemo::kDefaultSets * ProfileMemo::kWays *
                       (ProfileMemo::kMaxProfileBytes + ProfileMemo::kMaxHeaderBytes);
  EXPECT_LE(memo.MemoryBytes(), bound);
  EXPECT_LE(bound, size_t{4'456'448});  // the header's "at most 4.25 MiB"
  const size_t before = memo.MemoryBytes();
  EXPECT_EQ(memo.capacity(), ProfileMemo::kDefaultSets * ProfileMemo::kWays);

  // Five times as many distinct profiles as entries, each as large as kept.
  v1::HardwareProfile profile;
  profile.set_arch("x86_64");
  for (int i = 0; i < 5000; ++i) {
    profile.set_cpu_model(absl::StrCat("cpu-", i));
    profile.clear_probe_notes();
    std::string bytes = Bytes(profile);
    // probe_notes: a two-byte tag and a two-byte length.
    profile.add_probe_notes(std::string(ProfileMemo::kMaxProfileBytes - bytes.size() - 4, 'n'));
    bytes = Bytes(profile);
    ASSERT_EQ(bytes.size(), ProfileMemo::kMaxProfileBytes);
    ASSERT_TRUE(memo.Remember(bytes, kEpoch, DecisionFor(1), DecisionFor(1)));
  }
  EXPECT_EQ(memo.size(), memo.capacity());
  EXPECT_EQ(memo.MemoryBytes(), before);

  // One byte more is never kept.
  profile.add_probe_notes("");
  const std::string too_large = Bytes(profile);
  ASSERT_GT(too_large.size(), ProfileMemo::kMaxProfileBytes);
  EXPECT_FALSE(memo.Remember(too_large, kEpoch, DecisionFor(1), DecisionFor(1)));
  policy::Decision found;
  EXPECT_FALSE(memo.Find(too_large, kEpoch, v1::PRIORITY_SPEED, &found));
}

TEST(ResolveProfileMemoTest, TheLeastRecentlyUsedOfASetGoes) {
  ProfileMemo memo(ProfileMemo::Options{.sets = 1, .hash = SameHashForAll});
  std::vector<std::string> profiles;
  for (int i = 0; i <= ProfileMemo::kWays; ++i) {
    v1::HardwareProfile profile;
    profile.set_arch("x86_64");
    profile.set_cpu_model(absl::StrCat("cpu-", i));
    profiles.push_back(Bytes(profile));
  }
  policy::Decision found;
  for (int i = 0; i < ProfileMemo::kWays; ++i) {
    ASSERT_TRUE(memo.Remember(profiles[i], kEpoch, DecisionFor(i), DecisionFor(i)));
  }
  ASSERT_TRUE(memo.Find(profiles[0], kEpoch, v1::PRIORITY_SPEED, &found));  // 1 is now the oldest
  ASSERT_TRUE(memo.Remember(profiles[ProfileMemo::kWays], kEpoch, DecisionFor(9), DecisionFor(9)));
  EXPECT_TRUE(memo.Find(profiles[0], kEpoch, v1::PRIORITY_SPEED, &found));
  EXPECT_FALSE(memo.Find(profiles[1], kEpoch, v1::PRIORITY_SPEED, &found));
  EXPECT_TRUE(memo.Find(profiles[ProfileMemo::kWays], kEpoch, v1::PRIORITY_SPEED, &found));
  EXPECT_EQ(found.path, &kPaths[9]);
}

// Threads finding and remembering profiles that share few sets, so entries
// are replaced under them all the time: every hit is the decision kept for
// exactly those bytes.
TEST(ResolveProfileMemoTest, ConcurrentFindsAndRemembersNeverMixEntries) {
  ProfileMemo memo(ProfileMemo::Options{.sets = 4});
  constexpr int kProfiles = 48;
  std::vector<std::string> profiles;
  const v1::HardwareProfile base = ExampleProfile("intel-sapphire-rapids.json");
  for (int i = 0; i < kProfiles; ++i) {
    v1::HardwareProfile profile = base;
    // Alike but for one flag near the end, the compare's last bytes.
    profile.set_cpu_flags(profile.cpu_flags_size() - 1, absl::StrCat("flag", i));
    profile.set_cpu_model(absl::StrCat("model-", i % 3));  // three hashed prefixes
    profiles.push_back(Bytes(profile));
  }
  std::atomic<int> hits{0};
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 3000; ++round) {
        const int i = (round * 7 + t * 13) % kProfiles;
        policy::Decision found;
        if (memo.Find(profiles[i], kEpoch, v1::PRIORITY_FIDELITY, &found)) {
          ++hits;
          if (found.path != &kPaths[i]) ++wrong;
        } else {
          memo.Remember(profiles[i], kEpoch, DecisionFor(63), DecisionFor(i));
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_GT(hits.load(), 0);
  EXPECT_LE(memo.size(), memo.capacity());
}

}  // namespace
}  // namespace weightpath::server
