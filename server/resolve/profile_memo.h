// What a resolve learns from a device's HardwareProfile that the next resolve
// with that profile would only learn again: that it parses and passes
// validation, its hardware class, and the policy's decision for each
// priority. A device re-resolving sends the same profile each time, and
// devices of one model send the same profile, so the server keeps these
// verdicts keyed by the profile field's wire bytes and skips decoding,
// validating and evaluating the profile on the next call that sends them.
//
// What is compared. The bytes, never a hash alone: a hash only picks the
// set, and an entry is used only when the call's profile bytes equal the
// entry's, so no device can get the verdict of a profile it did not send.
// The one exception is the field a probe reads anew on every call, free RAM
// (ram_available_bytes, a scalar that neither validation nor the policy
// reads): where the entry's bytes hold it, the call's bytes must hold the
// same tag there followed by any well-formed varint of at most 10 bytes (one
// protobuf accepts for the type), and all other bytes must be equal. The
// call's profile then parses into the same message but for that value, so
// it passes validation exactly when the entry's did, and gets the same class
// and the same decision. (The other counts, total RAM, CPUs, thermal zones,
// do not change between probes of one device and are compared as bytes.)
//
// What is kept. Only profiles that parsed and passed validation; for each an
// entry with the policy's decision at SPEED and at FIDELITY (the effective
// priorities), tagged with the epoch of the snapshot it was decided against.
// A decision holds pointers into that snapshot's policy, so it is used only
// while the call's snapshot is the epoch's one (EpochFor): a reload starts a
// new epoch and every entry of the old one misses. Policies whose rules test
// labels are not memoised (EpochFor says so): their decision depends on more
// than the profile and the priority.
//
// Memory is fixed at construction: sets x kWays entries of at most
// kMaxProfileBytes each, plus a small header per entry. With the defaults
// (256 sets, 4 ways, 4 KiB) that is 4 MiB of profile bytes and 1024 headers,
// at most 4.25 MiB in all (MemoryBytes(), tested); the profile bytes are
// touched only as entries fill. Larger profiles are never kept.
//
// Which set. The set is picked by the profile's first fields (arch and
// cpu_model as an agent writes them), the bytes before any re-measured
// field, so a re-probe lands in the same set. The price: at most kWays
// variants of one CPU model (other RAM totals, flag lists, accelerators) are
// kept at once; a fleet with more of them cycles through the set, and each
// miss pays the full path plus the two decisions Remember keeps.
//
// Thread-safe. Each set has its own test-and-set lock, held for the compare
// (a memcmp of the profile) and the copy of the decision; calls for
// different sets never meet. A hostile device can at most evict entries of
// its own set by sending profiles that hash there, which sends those
// profiles' devices back to the full decode (the cost before the memo).
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "policy/policy.h"
#include "server/config/policy_snapshot.h"
#include "weightpath/v1/weightpath.pb.h"

namespace weightpath::server {

class ProfileMemo {
 public:
  static constexpr size_t kMaxProfileBytes = 4096;
  static constexpr int kWays = 4;
  static constexpr size_t kDefaultSets = 256;
  // Skipped fields per profile: free RAM once as protobuf writes it; a
  // profile that repeats the field more often than this is not kept.
  static constexpr int kMaxSkippedFields = 4;
  // The documented bound for the defaults; MemoryBytes() never exceeds
  // kDefaultSets * kWays * (kMaxProfileBytes + kMaxHeaderBytes).
  static constexpr size_t kMaxHeaderBytes = 256;

  struct Options {
    size_t sets = kDefaultSets;  // rounded up to a power of two
    // Picks the set from the hashed prefix; tests force collisions with it.
    uint64_t (*hash)(absl::string_view) = nullptr;
  };

  ProfileMemo() : ProfileMemo(Options()) {}
  explicit ProfileMemo(Options options);
  ProfileMemo(const ProfileMemo&) = delete;
  ProfileMemo& operator=(const ProfileMemo&) = delete;
  ~ProfileMemo();

  struct Epoch {
    uint64_t id = 0;  // 0: do not use the memo for this call
    bool policy_reads_labels = false;
  };
  // The epoch of `current` (the snapshot `holder` gave this call): the same
  // number on every thread for as long as it is the newest snapshot, a new
  // one once a reload has published another. id 0 when a reload landed
  // between the call's Current() and now.
  Epoch EpochFor(const SnapshotHolder& holder, const Snapshot& current);

  // The decision for `profile` (the profile field's payload) at `priority`
  // (UNSPECIFIED counts as SPEED), when an entry of `epoch` holds it. The
  // decision's pointers belong to the epoch's snapshot.
  bool Find(absl::string_view profile, uint64_t epoch, v1::Priority priority,
            policy::Decision* decision);

  // After a call with this profile was parsed, validated and decided against
  // the epoch's snapshot: keeps both decisions (both from policy::Evaluate
  // with this profile, at SPEED and at FIDELITY). false when the profile is
  // not kept (too large, not the shape this memo compares, epoch 0).
  bool Remember(absl::string_view profile, uint64_t epoch, const policy::Decision& speed,
                const policy::Decision& fidelity);

  size_t capacity() const { return set_count_ * kWays; }
  size_t size() const;  // entries in use, whatever their epoch
  // Everything the memo allocated, fixed at construction.
  size_t MemoryBytes() const;

 private:
  struct Skip {
    uint16_t offset = 0;     // of the field's tag, in the entry's bytes
    uint8_t tag_size = 0;
    uint8_t field_size = 0;  // tag and varint, in the entry's bytes
  };
  struct Entry {
    uint64_t hash = 0;
    uint64_t epoch = 0;  // 0: empty
    uint32_t last_used = 0;
    uint16_t size = 0;
    uint8_t skip_count = 0;
    std::array<Skip, kMaxSkippedFields> skips;
    std::array<policy::Decision, 2> decisions;  // SPEED, FIDELITY
  };
  class SpinLock {
   public:
    void Lock();
    void Unlock() { locked_.store(false, std::memory_order_release); }

   private:
    std::atomic<bool> locked_{false};
  };
  struct alignas(64) Set {
    SpinLock lock;
    uint32_t clock = 0;
    std::array<Entry, kWays> ways;
  };

  uint64_t Hash(absl::string_view prefix) const;
  const char* BytesOf(size_t set, int way) const {
    return bytes_.get() + (set * kWays + static_cast<size_t>(way)) * kMaxProfileBytes;
  }
  char* BytesOf(size_t set, int way) {
    return bytes_.get() + (set * kWays + static_cast<size_t>(way)) * kMaxProfileBytes;
  }
  bool Matches(const Entry& entry, const char* entry_bytes, absl::string_view profile) const;

  const uint64_t id_;
  const size_t set_count_;
  uint64_t (*const hash_)(absl::string_view);
  std::unique_ptr<Set[]> sets_;
  // Profile bytes of every entry, kMaxProfileBytes each, not initialized:
  // pages are touched only as entries fill.
  std::unique_ptr<char[]> bytes_;

  absl::Mutex epoch_mutex_;
  std::shared_ptr<const Snapshot> epoch_snapshot_ ABSL_GUARDED_BY(epoch_mutex_);
  uint64_t epoch_ ABSL_GUARDED_BY(epoch_mutex_) = 0;
  bool epoch_reads_labels_ ABSL_GUARDED_BY(epoch_mutex_) = false;
};

}  // namespace weightpath::server
