// The cryptography TUF metadata needs, on OpenSSL 3 (EVP only): SHA-256 and
// SHA-512 digests, and ed25519 keys (RFC 8032, "pure" ed25519 as TUF's
// "ed25519" scheme means: the message is signed as is, not pre-hashed).
//
// No file is read here: private keys come in as PEM bytes from the caller.
#pragma once

#include <memory>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

typedef struct evp_pkey_st EVP_PKEY;

namespace weightpath::trust {

// Lowercase hex, as TUF writes digests, key values and signatures.
std::string HexEncode(absl::string_view bytes);
// INVALID_ARGUMENT unless `hex` is an even number of hex digits (either case).
absl::StatusOr<std::string> HexDecode(absl::string_view hex);
bool IsLowercaseHex(absl::string_view text);

// The digests run OpenSSL's SHA-2 code directly, not through an EVP fetch:
// the same implementation, without the provider set-up (about 2 MiB of
// resident libcrypto) that a device's cached boot would otherwise pay for
// hashing a few key ids.
std::string Sha256(absl::string_view bytes);  // 32 raw bytes
std::string Sha256Hex(absl::string_view bytes);
std::string Sha512Hex(absl::string_view bytes);
// The digest of `bytes` under a TUF hash name ("sha256", "sha512");
// UNIMPLEMENTED for any other name.
absl::StatusOr<std::string> HashHex(absl::string_view algorithm, absl::string_view bytes);

// OpenSSL's key object for a public key, made on the first Verify (crypto.cc).
struct LazyEd25519Key;

class Ed25519PublicKey {
 public:
  // INVALID_ARGUMENT unless `raw` is 32 bytes. OpenSSL's key object is made
  // on the first Verify: parsing metadata (every key of a root) then costs
  // no OpenSSL provider set-up, which a boot that verifies nothing skips.
  static absl::StatusOr<Ed25519PublicKey> FromRaw(absl::string_view raw);
  // A SubjectPublicKeyInfo PEM ("-----BEGIN PUBLIC KEY-----"), e.g. from
  // `openssl pkey -pubout`.
  static absl::StatusOr<Ed25519PublicKey> FromPem(absl::string_view pem);

  // True only for a valid 64-byte signature of `message` by this key.
  bool Verify(absl::string_view message, absl::string_view signature) const;
  const std::string& raw() const { return raw_; }  // 32 bytes

 private:
  Ed25519PublicKey(std::shared_ptr<LazyEd25519Key> key, std::string raw)
      : key_(std::move(key)), raw_(std::move(raw)) {}
  std::shared_ptr<LazyEd25519Key> key_;  // shared: copies of a parsed key are cheap
  std::string raw_;
};

// A signing key. Never printed or logged: nothing here returns the private
// bytes except ToPem, which exists to write a freshly generated key.
class Ed25519PrivateKey {
 public:
  // A PKCS#8 PEM ("-----BEGIN PRIVATE KEY-----") as `openssl genpkey
  // -algorithm ed25519` writes. Encrypted PEM is refused (no prompt is ever
  // shown: the caller decrypts with `openssl pkey` if it must).
  static absl::StatusOr<Ed25519PrivateKey> FromPem(absl::string_view pem);
  static absl::StatusOr<Ed25519PrivateKey> Generate();

  absl::StatusOr<std::string> Sign(absl::string_view message) const;  // 64 bytes
  const Ed25519PublicKey& public_key() const { return public_key_; }
  // The caller writes it to a file it created 0600 and then wipes the
  // string with WipeSecret.
  absl::StatusOr<std::string> ToPem() const;

 private:
  Ed25519PrivateKey(std::shared_ptr<EVP_PKEY> key, Ed25519PublicKey public_key)
      : key_(std::move(key)), public_key_(std::move(public_key)) {}
  std::shared_ptr<EVP_PKEY> key_;
  Ed25519PublicKey public_key_;
};

// Overwrites a string that held key material (OPENSSL_cleanse, which the
// compiler may not elide) and empties it.
void WipeSecret(std::string& secret);

// Either kind of PEM: the public half of a private key, or a public key.
// Lets an operator hand over a new key as `openssl pkey -pubout` output
// without the private key leaving its holder.
absl::StatusOr<Ed25519PublicKey> Ed25519PublicKeyFromAnyPem(absl::string_view pem);

}  // namespace weightpath::trust
