#include "deploy/rollout_bucket.h"

#include <openssl/evp.h>

#include <string>

#include "absl/strings/str_cat.h"

namespace weightpath::deploy {

uint32_t RolloutBucket(absl::string_view rollout_id, absl::string_view device_id) {
  std::string input = absl::StrCat(rollout_id, "/", device_id);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int digest_length = 0;
  EVP_Digest(input.data(), input.size(), digest, &digest_length, EVP_sha256(), nullptr);
  uint64_t prefix = 0;
  for (int i = 0; i < 8; ++i) prefix = (prefix << 8) | digest[i];
  return static_cast<uint32_t>(prefix % kBucketCount);
}

}  // namespace weightpath::deploy
