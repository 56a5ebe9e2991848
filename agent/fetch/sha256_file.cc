#include "agent/fetch/sha256_file.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

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

struct DigestContextDeleter {
  void operator()(EVP_MD_CTX* context) const { EVP_MD_CTX_free(context); }
};

}  // namespace

absl::StatusOr<std::string> Sha256OfFile(const std::string& path) {
  UniqueFd file(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (file.get() < 0) {
    const std::string reason = std::strerror(errno);
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": ", reason));
    return absl::InternalError(absl::StrCat("cannot open ", path, ": ", reason));
  }
  std::unique_ptr<EVP_MD_CTX, DigestContextDeleter> context(EVP_MD_CTX_new());
  if (!context || EVP_DigestInit_ex(context.get(), EVP_sha256(), nullptr) != 1) {
    return absl::InternalError("cannot initialise the SHA-256 digest");
  }
  std::vector<unsigned char> buffer(kReadChunkBytes);
  for (;;) {
    const ssize_t read_bytes = ::read(file.get(), buffer.data(), buffer.size());
    if (read_bytes < 0) {
      if (errno == EINTR) continue;
      return absl::InternalError(absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
    }
    if (read_bytes == 0) break;
    if (EVP_DigestUpdate(context.get(), buffer.data(), static_cast<size_t>(read_bytes)) != 1) {
      return absl::InternalError("SHA-256 digest update failed");
    }
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int digest_length = 0;
  if (EVP_DigestFinal_ex(context.get(), digest, &digest_length) != 1) {
    return absl::InternalError("SHA-256 digest finalisation failed");
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(digest_length * 2);
  for (unsigned int i = 0; i < digest_length; ++i) {
    hex.push_back(kHex[digest[i] >> 4]);
    hex.push_back(kHex[digest[i] & 0xf]);
  }
  return hex;
}

bool IsSha256Hex(const std::string& text) {
  if (text.size() != 64) return false;
  for (char c : text) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace weightpath::agent
