#include "policy/content_version.h"

#include <openssl/evp.h>

#include <array>

namespace weightpath::policy {

std::string ContentVersion(std::string_view text) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int digest_length = 0;
  EVP_Digest(text.data(), text.size(), digest.data(), &digest_length, EVP_sha256(), nullptr);
  // 16 hex digits (64 bits) tell policies apart in a fleet; the full digest
  // would only lengthen every response and log line.
  constexpr size_t kShownBytes = 8;
  std::string version = "sha256:";
  static constexpr char kHex[] = "0123456789abcdef";
  for (size_t i = 0; i < kShownBytes; ++i) {
    version.push_back(kHex[digest[i] >> 4]);
    version.push_back(kHex[digest[i] & 0xf]);
  }
  return version;
}

}  // namespace weightpath::policy
