// SHA-256 of a file, streamed, as lowercase hex.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

struct evp_md_ctx_st;

namespace weightpath::agent {

// A SHA-256 fed as bytes arrive, so a download is hashed while it streams
// instead of read back from disk once it is complete.
class Sha256Stream {
 public:
  Sha256Stream();
  ~Sha256Stream();
  Sha256Stream(const Sha256Stream&) = delete;
  Sha256Stream& operator=(const Sha256Stream&) = delete;

  void Update(const void* data, size_t bytes);
  // Starts over, as for a download restarted from its first byte.
  void Reset();
  // The digest of every byte fed since the last Reset, as lowercase hex.
  // INTERNAL when OpenSSL fails (it does not on a working build).
  absl::StatusOr<std::string> FinishHex();
  uint64_t bytes() const { return bytes_; }

 private:
  struct Deleter {
    void operator()(evp_md_ctx_st* context) const;
  };
  std::unique_ptr<evp_md_ctx_st, Deleter> context_;
  bool failed_ = false;
  uint64_t bytes_ = 0;
};

// Feeds the first `bytes` of the open file `fd` (read with pread, 1 MiB at a
// time) to `hash`. INTERNAL naming `label` on a read error or a file shorter
// than `bytes`.
absl::Status HashFilePrefix(int fd, uint64_t bytes, const std::string& label, Sha256Stream* hash);

// NOT_FOUND when the file is missing, INTERNAL on a read or digest failure.
absl::StatusOr<std::string> Sha256OfFile(const std::string& path);

// 64 lowercase hex digits.
bool IsSha256Hex(const std::string& text);

}  // namespace weightpath::agent
