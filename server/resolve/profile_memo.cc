#include "server/resolve/profile_memo.h"

#include <cstring>
#include <thread>

#include "absl/hash/hash.h"

namespace weightpath::server {
namespace {

std::atomic<uint64_t> next_memo_id{1};

// The set is picked from the profile's first bytes, up to the first skipped
// field: arch and cpu_model as an agent writes them.
constexpr size_t kHashedPrefixBytes = 32;

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

// The one HardwareProfile field a probe reads differently on every call
// (free RAM), a scalar varint that validation and the policy never read; see
// the header. Every other field, stable from one probe to the next, is
// compared like the rest: each skipped field costs every lookup a step.
bool SkippedField(uint32_t tag) {
  return tag == (v1::HardwareProfile::kRamAvailableBytesFieldNumber << 3 | kVarint);
}

// The size of the varint at `pos`: at most 10 bytes, the tenth at most 1
// (the range every protobuf parser reads alike); 0 when not one of those.
size_t VarintSize(absl::string_view bytes, size_t pos) {
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  for (size_t i = 0; i < 10 && pos + i < bytes.size(); ++i) {
    const uint8_t byte = data[pos + i];
    if ((byte & 0x80) == 0) return i == 9 && byte > 1 ? 0 : i + 1;
  }
  return 0;
}

bool ReadVarint(absl::string_view bytes, size_t* pos, uint64_t* value) {
  const size_t size = VarintSize(bytes, *pos);
  if (size == 0) return false;
  uint64_t result = 0;
  for (size_t i = 0; i < size; ++i) {
    result |= static_cast<uint64_t>(static_cast<uint8_t>(bytes[*pos + i]) & 0x7f) << (7 * i);
  }
  *pos += size;
  *value = result;
  return true;
}

// Steps over the field at `*pos`; its tag in `*tag`. false when malformed
// or of a type a HardwareProfile never holds (groups).
bool NextField(absl::string_view bytes, size_t* pos, uint32_t* tag) {
  uint64_t raw_tag = 0;
  if (!ReadVarint(bytes, pos, &raw_tag) || raw_tag > UINT32_MAX || (raw_tag >> 3) == 0) return false;
  *tag = static_cast<uint32_t>(raw_tag);
  uint64_t value = 0;
  switch (*tag & 7) {
    case kVarint:
      return ReadVarint(bytes, pos, &value);
    case kFixed64:
      if (bytes.size() - *pos < 8) return false;
      *pos += 8;
      return true;
    case kFixed32:
      if (bytes.size() - *pos < 4) return false;
      *pos += 4;
      return true;
    case kLengthDelimited:
      if (!ReadVarint(bytes, pos, &value) || value > bytes.size() - *pos) return false;
      *pos += value;
      return true;
    default:
      return false;
  }
}

// The end of the bytes the set is picked by: whole fields from the start,
// stopping before the first skipped field or once 32 bytes are covered.
// false when the fields there are malformed. Runs on every lookup: the
// one-byte tags and lengths of an agent's first fields are read inline.
bool HashedPrefixEnd(absl::string_view profile, size_t* end) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(profile.data());
  size_t pos = 0;
  while (pos < profile.size() && pos < kHashedPrefixBytes) {
    const size_t start = pos;
    const uint8_t tag = bytes[pos];
    if (tag < 0x80 && (tag & 7) == kLengthDelimited && pos + 1 < profile.size() &&
        bytes[pos + 1] < 0x80) {
      const size_t length = bytes[pos + 1];
      if (length > profile.size() - pos - 2) return false;
      pos += 2 + length;
      continue;
    }
    uint32_t full_tag = 0;
    if (!NextField(profile, &pos, &full_tag)) return false;
    if (SkippedField(full_tag)) {
      *end = start;
      return true;
    }
  }
  *end = pos;
  return true;
}

int PrioritySlot(v1::Priority priority) { return priority == v1::PRIORITY_FIDELITY ? 1 : 0; }

bool PolicyReadsLabels(const policy::Policy& policy) {
  for (const policy::Rule& rule : policy.rules()) {
    if (!rule.match.labels.empty()) return true;
  }
  return false;
}

}  // namespace

void ProfileMemo::SpinLock::Lock() {
  for (int spins = 0; locked_.exchange(true, std::memory_order_acquire); ++spins) {
    while (locked_.load(std::memory_order_relaxed)) {
      if (++spins > 64) std::this_thread::yield();
    }
  }
}

ProfileMemo::ProfileMemo(Options options)
    : id_(next_memo_id.fetch_add(1, std::memory_order_relaxed)),
      set_count_([&] {
        size_t sets = 1;
        while (sets < options.sets) sets <<= 1;
        return sets;
      }()),
      hash_(options.hash),
      sets_(new Set[set_count_]),
      bytes_(new char[set_count_ * kWays * kMaxProfileBytes]) {}

ProfileMemo::~ProfileMemo() = default;

ProfileMemo::Epoch ProfileMemo::EpochFor(const SnapshotHolder& holder, const Snapshot& current) {
  // The thread's last answer, held with a reference to its snapshot so the
  // address cannot be another snapshot's while it is kept here.
  struct ThreadEpoch {
    uint64_t memo_id = 0;
    const Snapshot* snapshot = nullptr;
    std::shared_ptr<const Snapshot> held;
    Epoch epoch;
  };
  thread_local ThreadEpoch cached;
  if (cached.memo_id == id_ && cached.snapshot == &current) return cached.epoch;

  absl::MutexLock lock(&epoch_mutex_);
  if (epoch_snapshot_.get() != &current) {
    std::shared_ptr<const Snapshot> shared = holder.Share();
    // A reload landed after this call's Current(): the call decides against
    // a snapshot no longer the newest, so it is not memoised.
    if (shared.get() != &current) return Epoch();
    epoch_snapshot_ = std::move(shared);
    ++epoch_;
    epoch_reads_labels_ = PolicyReadsLabels(*epoch_snapshot_->policy);
  }
  cached.memo_id = id_;
  cached.snapshot = &current;
  cached.held = epoch_snapshot_;
  cached.epoch = Epoch{epoch_, epoch_reads_labels_};
  return cached.epoch;
}

namespace {

uint64_t Load64(const char* bytes) {
  uint64_t word = 0;
  std::memcpy(&word, bytes, 8);
  return word;
}

uint32_t Load32(const char* bytes) {
  uint32_t word = 0;
  std::memcpy(&word, bytes, 4);
  return word;
}

// The prefix's hash, which picks its set. Not absl::Hash: for a 30-50 byte
// prefix that is about a hundred instructions a lookup, as much as the rest
// of the lookup but the byte compare. The prefix's words folded with a
// multiply and a shift, from abseil's per-process seed (it moves with ASLR),
// so no device can aim profiles at one set of a server ahead of time; a
// collision costs a set's room, never a wrong answer (entries are compared
// byte for byte).
uint64_t PrefixHash(absl::string_view prefix) {
  static const uint64_t seed = absl::Hash<uint64_t>()(0);
  constexpr uint64_t kMultiplier = 0x9e3779b97f4a7c15ULL;
  const char* bytes = prefix.data();
  const size_t size = prefix.size();
  uint64_t state = seed ^ (size * kMultiplier);
  size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    state = (state ^ Load64(bytes + i)) * kMultiplier;
    state ^= state >> 32;
  }
  uint64_t tail = 0;
  if (i < size) {
    if (size >= 8) {
      tail = Load64(bytes + size - 8);  // the last 8 bytes, overlapping the words before
    } else {
      for (size_t j = i; j < size; ++j) tail = tail << 8 | static_cast<uint8_t>(bytes[j]);
    }
  }
  state = (state ^ tail) * kMultiplier;
  return state ^ (state >> 29);
}

// memcmp, with the short runs between neighbouring skipped fields (often a
// tag or two) compared by two overlapping loads rather than through a call.
bool SameBytes(const char* a, const char* b, size_t size) {
  if (size > 16) return std::memcmp(a, b, size) == 0;
  if (size >= 8) {
    return Load64(a) == Load64(b) && Load64(a + size - 8) == Load64(b + size - 8);
  }
  if (size >= 4) {
    return Load32(a) == Load32(b) && Load32(a + size - 4) == Load32(b + size - 4);
  }
  for (size_t i = 0; i < size; ++i) {
    if (a[i] != b[i]) return false;
  }
  return true;
}

// VarintSize, one load for a varint of up to 8 bytes (all of a probe's
// figures) when 8 bytes are there to read.
size_t QuickVarintSize(absl::string_view bytes, size_t pos) {
  if (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ && bytes.size() - pos >= 8) {
    // Little-endian: the first byte without its top bit ends the varint.
    const uint64_t ends = ~Load64(bytes.data() + pos) & 0x8080808080808080ULL;
    if (ends != 0) return static_cast<size_t>(__builtin_ctzll(ends)) / 8 + 1;
  }
  return VarintSize(bytes, pos);
}

}  // namespace

uint64_t ProfileMemo::Hash(absl::string_view prefix) const {
  return hash_ != nullptr ? hash_(prefix) : PrefixHash(prefix);
}

bool ProfileMemo::Matches(const Entry& entry, const char* entry_bytes,
                          absl::string_view profile) const {
  size_t in = 0;     // in the call's profile
  size_t at = 0;     // in the entry's bytes
  for (int i = 0; i < entry.skip_count; ++i) {
    const Skip& skip = entry.skips[static_cast<size_t>(i)];
    // Equal bytes up to and including the skipped field's tag.
    const size_t same = skip.offset + skip.tag_size - at;
    if (profile.size() - in < same || !SameBytes(profile.data() + in, entry_bytes + at, same)) {
      return false;
    }
    in += same;
    const size_t value_size = QuickVarintSize(profile, in);
    if (value_size == 0) return false;
    in += value_size;
    at = skip.offset + skip.field_size;
  }
  const size_t rest = entry.size - at;
  return profile.size() - in == rest && SameBytes(profile.data() + in, entry_bytes + at, rest);
}

bool ProfileMemo::Find(absl::string_view profile, uint64_t epoch, v1::Priority priority,
                       policy::Decision* decision) {
  if (epoch == 0 || profile.size() > kMaxProfileBytes) return false;
  size_t prefix_end = 0;
  if (!HashedPrefixEnd(profile, &prefix_end)) return false;
  const uint64_t hash = Hash(profile.substr(0, prefix_end));
  const size_t set_index = hash & (set_count_ - 1);
  Set& set = sets_[set_index];
  bool found = false;
  set.lock.Lock();
  for (int way = 0; way < kWays; ++way) {
    Entry& entry = set.ways[static_cast<size_t>(way)];
    if (entry.epoch != epoch || entry.hash != hash) continue;
    if (!Matches(entry, BytesOf(set_index, way), profile)) continue;
    *decision = entry.decisions[static_cast<size_t>(PrioritySlot(priority))];
    entry.last_used = ++set.clock;
    found = true;
    break;
  }
  set.lock.Unlock();
  return found;
}

bool ProfileMemo::Remember(absl::string_view profile, uint64_t epoch, const policy::Decision& speed,
                           const policy::Decision& fidelity) {
  if (epoch == 0 || profile.size() > kMaxProfileBytes) return false;
  size_t prefix_end = 0;
  if (!HashedPrefixEnd(profile, &prefix_end)) return false;
  Entry fresh;
  fresh.epoch = epoch;
  fresh.hash = Hash(profile.substr(0, prefix_end));
  fresh.size = static_cast<uint16_t>(profile.size());
  fresh.decisions = {speed, fidelity};
  for (size_t pos = 0; pos < profile.size();) {
    const size_t start = pos;
    uint32_t tag = 0;
    if (!NextField(profile, &pos, &tag)) return false;
    if (!SkippedField(tag)) continue;
    if (fresh.skip_count == kMaxSkippedFields) return false;
    Skip& skip = fresh.skips[fresh.skip_count++];
    skip.offset = static_cast<uint16_t>(start);
    skip.tag_size = static_cast<uint8_t>(VarintSize(profile, start));
    skip.field_size = static_cast<uint8_t>(pos - start);
  }

  const size_t set_index = fresh.hash & (set_count_ - 1);
  Set& set = sets_[set_index];
  set.lock.Lock();
  // The same profile (a stale epoch's entry, or one another thread kept
  // meanwhile) is replaced in place; otherwise an empty way, else the least
  // recently used.
  int victim = -1;
  for (int way = 0; way < kWays && victim < 0; ++way) {
    const Entry& entry = set.ways[static_cast<size_t>(way)];
    if (entry.epoch != 0 && entry.hash == fresh.hash && Matches(entry, BytesOf(set_index, way), profile)) {
      victim = way;
    }
  }
  for (int way = 0; way < kWays && victim < 0; ++way) {
    if (set.ways[static_cast<size_t>(way)].epoch == 0) victim = way;
  }
  if (victim < 0) {
    victim = 0;
    for (int way = 1; way < kWays; ++way) {
      // Unsigned differences, so the clock may wrap.
      if (set.clock - set.ways[static_cast<size_t>(way)].last_used >
          set.clock - set.ways[static_cast<size_t>(victim)].last_used) {
        victim = way;
      }
    }
  }
  fresh.last_used = ++set.clock;
  std::memcpy(BytesOf(set_index, victim), profile.data(), profile.size());
  set.ways[static_cast<size_t>(victim)] = fresh;
  set.lock.Unlock();
  return true;
}

size_t ProfileMemo::size() const {
  size_t used = 0;
  for (size_t i = 0; i < set_count_; ++i) {
    Set& set = sets_[i];
    set.lock.Lock();
    for (const Entry& entry : set.ways) used += entry.epoch != 0 ? 1 : 0;
    set.lock.Unlock();
  }
  return used;
}

size_t ProfileMemo::MemoryBytes() const {
  return sizeof(*this) + set_count_ * sizeof(Set) + set_count_ * kWays * kMaxProfileBytes;
}

}  // namespace weightpath::server
