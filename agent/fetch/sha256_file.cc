#include "agent/fetch/sha256_file.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/unique_fd.h"

namespace weightpath::agent {
namespace {

// Large enough that hashing runs at the digest's speed rather than the
// syscall rate; small enough to stay out of the agent's memory budget.
constexpr size_t kReadChunkBytes = 1 << 20;

}  // namespace

void Sha256Stream::Deleter::operator()(evp_md_ctx_st* context) const { EVP_MD_CTX_free(context); }

Sha256Stream::Sha256Stream() : context_(EVP_MD_CTX_new()) { Reset(); }
Sha256Stream::~Sha256Stream() = default;

void Sha256Stream::Reset() {
  bytes_ = 0;
  failed_ = !context_ || EVP_DigestInit_ex(context_.get(), EVP_sha256(), nullptr) != 1;
}

void Sha256Stream::Update(const void* data, size_t bytes) {
  if (bytes == 0 || failed_) return;
  if (EVP_DigestUpdate(context_.get(), data, bytes) != 1) failed_ = true;
  bytes_ += bytes;
}

absl::StatusOr<std::string> Sha256Stream::FinishHex() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int digest_length = 0;
  if (failed_ || EVP_DigestFinal_ex(context_.get(), digest, &digest_length) != 1) {
    return absl::InternalError("SHA-256 digest failed");
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(digest_length * 2);
  for (unsigned int i = 0; i < digest_length; ++i) {
    hex.push_back(kHex[digest[i] >> 4]);
    hex.push_back(kHex[digest[i] & 0xf]);
  }
  Reset();
  return hex;
}

absl::Status HashFilePrefix(int fd, uint64_t bytes, const std::string& label, Sha256Stream* hash) {
  std::vector<unsigned char> buffer(static_cast<size_t>(std::min<uint64_t>(kReadChunkBytes, bytes)));
  uint64_t position = 0;
  while (position < bytes) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(buffer.size(), bytes - position));
    const ssize_t got = ::pread(fd, buffer.data(), want, static_cast<off_t>(position));
    if (got < 0) {
      if (errno == EINTR) continue;
      return absl::InternalError(absl::StrCat("cannot read ", label, ": ", std::strerror(errno)));
    }
    if (got == 0) {
      return absl::InternalError(
          absl::StrCat("cannot read ", label, ": ended at byte ", position, " of ", bytes));
    }
    hash->Update(buffer.data(), static_cast<size_t>(got));
    position += static_cast<uint64_t>(got);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Sha256OfFile(const std::string& path) {
  UniqueFd file(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (file.get() < 0) {
    const std::string reason = std::strerror(errno);
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": ", reason));
    return absl::InternalError(absl::StrCat("cannot open ", path, ": ", reason));
  }
  Sha256Stream hash;
  std::vector<unsigned char> buffer(kReadChunkBytes);
  for (;;) {
    const ssize_t read_bytes = ::read(file.get(), buffer.data(), buffer.size());
    if (read_bytes < 0) {
      if (errno == EINTR) continue;
      return absl::InternalError(absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
    }
    if (read_bytes == 0) break;
    hash.Update(buffer.data(), static_cast<size_t>(read_bytes));
  }
  return hash.FinishHex();
}

bool IsSha256Hex(const std::string& text) {
  if (text.size() != 64) return false;
  for (char c : text) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace weightpath::agent
