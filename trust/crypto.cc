// SHA256_Init and friends are deprecated in OpenSSL 3 in favour of EVP, but
// they are the implementation EVP's default provider calls, without the
// provider (see crypto.h).
#define OPENSSL_SUPPRESS_DEPRECATED
#include "trust/crypto.h"

#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/sha.h>

#include <mutex>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace weightpath::trust {
namespace {

constexpr size_t kEd25519KeyBytes = 32;
constexpr size_t kEd25519SignatureBytes = 64;

struct PkeyDeleter {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
struct MdContextDeleter {
  void operator()(EVP_MD_CTX* context) const { EVP_MD_CTX_free(context); }
};
struct BioDeleter {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
using MdContext = std::unique_ptr<EVP_MD_CTX, MdContextDeleter>;
using Bio = std::unique_ptr<BIO, BioDeleter>;

std::shared_ptr<EVP_PKEY> Share(EVP_PKEY* key) { return {key, PkeyDeleter()}; }

// Never prompts: a PEM read with OpenSSL's default callback would ask on the
// terminal for the passphrase of an encrypted key.
int RefusePassphrase(char*, int, int, void*) { return 0; }

// A digest over memory fails only when OpenSSL itself is broken.
void CheckDigest(int ok) {
  if (ok != 1) std::abort();
}

std::string Sha256Raw(absl::string_view bytes) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256_CTX context;
  CheckDigest(SHA256_Init(&context));
  CheckDigest(SHA256_Update(&context, bytes.data(), bytes.size()));
  CheckDigest(SHA256_Final(digest, &context));
  OPENSSL_cleanse(&context, sizeof(context));
  return std::string(reinterpret_cast<const char*>(digest), sizeof(digest));
}

std::string Sha512Raw(absl::string_view bytes) {
  unsigned char digest[SHA512_DIGEST_LENGTH];
  SHA512_CTX context;
  CheckDigest(SHA512_Init(&context));
  CheckDigest(SHA512_Update(&context, bytes.data(), bytes.size()));
  CheckDigest(SHA512_Final(digest, &context));
  OPENSSL_cleanse(&context, sizeof(context));
  return std::string(reinterpret_cast<const char*>(digest), sizeof(digest));
}

absl::StatusOr<std::string> RawPublicKey(EVP_PKEY* key) {
  unsigned char raw[kEd25519KeyBytes];
  size_t length = sizeof(raw);
  if (EVP_PKEY_get_raw_public_key(key, raw, &length) != 1 || length != kEd25519KeyBytes) {
    ERR_clear_error();
    return absl::InvalidArgumentError("cannot read the ed25519 public key");
  }
  return std::string(reinterpret_cast<const char*>(raw), length);
}

bool IsEd25519(EVP_PKEY* key) { return EVP_PKEY_get_id(key) == EVP_PKEY_ED25519; }

Bio MemoryBio(absl::string_view bytes) {
  return Bio(BIO_new_mem_buf(bytes.data(), static_cast<int>(bytes.size())));
}

}  // namespace

std::string HexEncode(absl::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(bytes.size() * 2);
  for (char c : bytes) {
    const unsigned char byte = static_cast<unsigned char>(c);
    hex.push_back(kDigits[byte >> 4]);
    hex.push_back(kDigits[byte & 0xF]);
  }
  return hex;
}

absl::StatusOr<std::string> HexDecode(absl::string_view hex) {
  if (hex.size() % 2 != 0) return absl::InvalidArgumentError("odd number of hex digits");
  const auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string bytes;
  bytes.reserve(hex.size() / 2);
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int high = nibble(hex[i]);
    const int low = nibble(hex[i + 1]);
    if (high < 0 || low < 0) return absl::InvalidArgumentError("not a hex string");
    bytes.push_back(static_cast<char>((high << 4) | low));
  }
  return bytes;
}

bool IsLowercaseHex(absl::string_view text) {
  for (char c : text) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return !text.empty();
}

std::string Sha256(absl::string_view bytes) { return Sha256Raw(bytes); }
std::string Sha256Hex(absl::string_view bytes) { return HexEncode(Sha256Raw(bytes)); }
std::string Sha512Hex(absl::string_view bytes) { return HexEncode(Sha512Raw(bytes)); }

absl::StatusOr<std::string> HashHex(absl::string_view algorithm, absl::string_view bytes) {
  if (algorithm == "sha256") return Sha256Hex(bytes);
  if (algorithm == "sha512") return Sha512Hex(bytes);
  return absl::UnimplementedError(
      absl::StrCat("hash algorithm \"", algorithm, "\" is not supported (sha256, sha512)"));
}

struct LazyEd25519Key {
  std::once_flag made;
  std::shared_ptr<EVP_PKEY> key;  // null until made, or when OpenSSL refused the bytes

  // Thread-safe: a key parsed once may be verified from several threads.
  EVP_PKEY* Get(const std::string& raw) {
    std::call_once(made, [&] {
      EVP_PKEY* created = EVP_PKEY_new_raw_public_key(
          EVP_PKEY_ED25519, nullptr, reinterpret_cast<const unsigned char*>(raw.data()),
          raw.size());
      if (created == nullptr) {
        ERR_clear_error();
        return;
      }
      key = Share(created);
    });
    return key.get();
  }
};

absl::StatusOr<Ed25519PublicKey> Ed25519PublicKey::FromRaw(absl::string_view raw) {
  if (raw.size() != kEd25519KeyBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("an ed25519 public key is 32 bytes, not ", raw.size()));
  }
  return Ed25519PublicKey(std::make_shared<LazyEd25519Key>(), std::string(raw));
}

absl::StatusOr<Ed25519PublicKey> Ed25519PublicKey::FromPem(absl::string_view pem) {
  Bio bio = MemoryBio(pem);
  if (!bio) return absl::ResourceExhaustedError("cannot allocate a BIO");
  EVP_PKEY* key = PEM_read_bio_PUBKEY(bio.get(), nullptr, RefusePassphrase, nullptr);
  if (key == nullptr) {
    ERR_clear_error();
    return absl::InvalidArgumentError("not a PEM public key");
  }
  std::shared_ptr<EVP_PKEY> shared = Share(key);
  if (!IsEd25519(key)) return absl::InvalidArgumentError("the PEM public key is not ed25519");
  absl::StatusOr<std::string> raw = RawPublicKey(key);
  if (!raw.ok()) return raw.status();
  return FromRaw(*raw);
}

bool Ed25519PublicKey::Verify(absl::string_view message, absl::string_view signature) const {
  if (signature.size() != kEd25519SignatureBytes || !key_) return false;
  EVP_PKEY* key = key_->Get(raw_);
  if (key == nullptr) return false;
  MdContext context(EVP_MD_CTX_new());
  if (!context) return false;
  // ed25519 has no separate digest: the md argument is null and the whole
  // message goes through the one-shot EVP_DigestVerify.
  const bool valid =
      EVP_DigestVerifyInit(context.get(), nullptr, nullptr, nullptr, key) == 1 &&
      EVP_DigestVerify(context.get(), reinterpret_cast<const unsigned char*>(signature.data()),
                       signature.size(), reinterpret_cast<const unsigned char*>(message.data()),
                       message.size()) == 1;
  // A bad signature leaves an error on OpenSSL's per-thread queue; the next
  // unrelated call must not find it.
  ERR_clear_error();
  return valid;
}

absl::StatusOr<Ed25519PrivateKey> Ed25519PrivateKey::FromPem(absl::string_view pem) {
  if (pem.find("ENCRYPTED") != absl::string_view::npos) {
    return absl::InvalidArgumentError(
        "encrypted private keys are not supported (decrypt it with `openssl pkey` into a 0600 "
        "file, or keep it on the machine that signs)");
  }
  Bio bio = MemoryBio(pem);
  if (!bio) return absl::ResourceExhaustedError("cannot allocate a BIO");
  EVP_PKEY* key = PEM_read_bio_PrivateKey(bio.get(), nullptr, RefusePassphrase, nullptr);
  if (key == nullptr) {
    ERR_clear_error();
    return absl::InvalidArgumentError(
        "not a PEM private key (expected the output of `openssl genpkey -algorithm ed25519`)");
  }
  std::shared_ptr<EVP_PKEY> shared = Share(key);
  if (!IsEd25519(key)) return absl::InvalidArgumentError("the private key is not ed25519");
  absl::StatusOr<std::string> raw = RawPublicKey(key);
  if (!raw.ok()) return raw.status();
  absl::StatusOr<Ed25519PublicKey> public_key = Ed25519PublicKey::FromRaw(*raw);
  if (!public_key.ok()) return public_key.status();
  return Ed25519PrivateKey(std::move(shared), *std::move(public_key));
}

absl::StatusOr<Ed25519PrivateKey> Ed25519PrivateKey::Generate() {
  EVP_PKEY* key = EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519");
  if (key == nullptr) {
    ERR_clear_error();
    return absl::InternalError("OpenSSL cannot generate an ed25519 key");
  }
  std::shared_ptr<EVP_PKEY> shared = Share(key);
  absl::StatusOr<std::string> raw = RawPublicKey(key);
  if (!raw.ok()) return raw.status();
  absl::StatusOr<Ed25519PublicKey> public_key = Ed25519PublicKey::FromRaw(*raw);
  if (!public_key.ok()) return public_key.status();
  return Ed25519PrivateKey(std::move(shared), *std::move(public_key));
}

absl::StatusOr<std::string> Ed25519PrivateKey::Sign(absl::string_view message) const {
  MdContext context(EVP_MD_CTX_new());
  if (!context) return absl::ResourceExhaustedError("cannot allocate a signing context");
  unsigned char signature[kEd25519SignatureBytes];
  size_t length = sizeof(signature);
  if (EVP_DigestSignInit(context.get(), nullptr, nullptr, nullptr, key_.get()) != 1 ||
      EVP_DigestSign(context.get(), signature, &length,
                     reinterpret_cast<const unsigned char*>(message.data()),
                     message.size()) != 1 ||
      length != kEd25519SignatureBytes) {
    ERR_clear_error();
    return absl::InternalError("OpenSSL cannot sign with the ed25519 key");
  }
  return std::string(reinterpret_cast<const char*>(signature), length);
}

absl::StatusOr<std::string> Ed25519PrivateKey::ToPem() const {
  // Secure-heap memory BIO: the encoded key is wiped when the BIO is freed.
  Bio bio(BIO_new(BIO_s_secmem()));
  if (!bio) return absl::ResourceExhaustedError("cannot allocate a BIO");
  if (PEM_write_bio_PrivateKey(bio.get(), key_.get(), nullptr, nullptr, 0, nullptr, nullptr) !=
      1) {
    ERR_clear_error();
    return absl::InternalError("cannot encode the private key as PEM");
  }
  char* data = nullptr;
  const long length = BIO_get_mem_data(bio.get(), &data);
  if (length <= 0 || data == nullptr) return absl::InternalError("empty PEM encoding");
  return std::string(data, static_cast<size_t>(length));
}

void WipeSecret(std::string& secret) {
  if (!secret.empty()) OPENSSL_cleanse(secret.data(), secret.size());
  secret.clear();
}

absl::StatusOr<Ed25519PublicKey> Ed25519PublicKeyFromAnyPem(absl::string_view pem) {
  if (pem.find("PRIVATE KEY-----") != absl::string_view::npos) {
    absl::StatusOr<Ed25519PrivateKey> key = Ed25519PrivateKey::FromPem(pem);
    if (!key.ok()) return key.status();
    return key->public_key();
  }
  return Ed25519PublicKey::FromPem(pem);
}

}  // namespace weightpath::trust
