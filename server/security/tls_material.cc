#include "server/security/tls_material.h"

#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <ctime>
#include <memory>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "server/config/file_fingerprint.h"

namespace weightpath::server {
namespace {

using BioPtr = std::unique_ptr<BIO, decltype(&BIO_free)>;
using X509Ptr = std::unique_ptr<X509, decltype(&X509_free)>;
using KeyPtr = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;

BioPtr MemoryBio(absl::string_view text) {
  return BioPtr(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())), &BIO_free);
}

// "--tls_cert: /etc/tls/tls.crt: " before each reason.
std::string Where(absl::string_view flag, const std::string& path) {
  return absl::StrCat("--", flag, ": ", path, ": ");
}

// The last OpenSSL error's reason ("bad base64 decode"), and the queue
// emptied so the next check starts clean.
std::string TakeOpenSslReason() {
  const unsigned long error = ERR_peek_last_error();
  const char* reason = error == 0 ? nullptr : ERR_reason_error_string(error);
  ERR_clear_error();
  return reason == nullptr ? "unknown error" : reason;
}

absl::StatusOr<std::string> ReadTlsFile(absl::string_view flag, const std::string& path) {
  absl::StatusOr<std::string> text = ReadWholeFile(path, kMaxTlsFileBytes);
  if (!text.ok()) {
    // ReadWholeFile's message already starts with the path.
    return absl::Status(text.status().code(),
                        absl::StrCat("--", flag, ": ", text.status().message()));
  }
  // What `cat new > tls.crt` leaves for a moment, and what gRPC aborted on.
  if (text->empty()) return absl::InvalidArgumentError(absl::StrCat(Where(flag, path), "empty"));
  if (!absl::StrContains(*text, "-----BEGIN ")) {
    return absl::InvalidArgumentError(absl::StrCat(Where(flag, path), "not PEM"));
  }
  return text;
}

// Every certificate in `pem`, in order. A file cut short in the middle of a
// certificate is refused rather than served with the certificates before
// the cut; PEM blocks of other kinds are skipped, as the TLS library does.
absl::StatusOr<std::vector<X509Ptr>> ParseCertificates(absl::string_view flag,
                                                       const std::string& path,
                                                       absl::string_view pem) {
  ERR_clear_error();
  BioPtr bio = MemoryBio(pem);
  if (bio == nullptr) return absl::ResourceExhaustedError("cannot allocate a BIO");
  std::vector<X509Ptr> certificates;
  while (true) {
    X509Ptr certificate(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr), &X509_free);
    if (certificate == nullptr) break;
    certificates.push_back(std::move(certificate));
  }
  const unsigned long error = ERR_peek_last_error();
  const bool reached_end =
      ERR_GET_LIB(error) == ERR_LIB_PEM && ERR_GET_REASON(error) == PEM_R_NO_START_LINE;
  if (!reached_end) {
    return absl::InvalidArgumentError(absl::StrCat(Where(flag, path),
                                                   "a certificate does not parse (",
                                                   TakeOpenSslReason(), ")"));
  }
  ERR_clear_error();
  if (certificates.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(Where(flag, path), "holds no PEM certificate"));
  }
  return certificates;
}

absl::StatusOr<absl::Time> ToTime(const ASN1_TIME* at) {
  std::tm broken_down{};
  if (at == nullptr || ASN1_TIME_to_tm(at, &broken_down) != 1) {
    return absl::InvalidArgumentError("unreadable validity date");
  }
  return absl::FromTimeT(timegm(&broken_down));
}

std::string SerialHex(const X509* certificate) {
  std::unique_ptr<BIGNUM, decltype(&BN_free)> number(
      ASN1_INTEGER_to_BN(X509_get0_serialNumber(certificate), nullptr), &BN_free);
  if (number == nullptr) return "?";
  char* hex = BN_bn2hex(number.get());
  if (hex == nullptr) return "?";
  std::string serial(hex);
  OPENSSL_free(hex);
  return serial;
}

// Never asks for a passphrase: OpenSSL's default would prompt on the
// terminal, and a server has nobody there.
int RefusePassphrase(char* /*buffer*/, int /*size*/, int /*rwflag*/, void* /*user*/) { return 0; }

}  // namespace

absl::StatusOr<TlsMaterial> LoadTlsMaterial(const TlsPaths& paths) {
  TlsMaterial material;
  absl::StatusOr<std::string> chain = ReadTlsFile("tls_cert", paths.certificate);
  if (!chain.ok()) return chain.status();
  absl::StatusOr<std::string> key = ReadTlsFile("tls_key", paths.key);
  if (!key.ok()) return key.status();
  absl::StatusOr<std::vector<X509Ptr>> certificates =
      ParseCertificates("tls_cert", paths.certificate, *chain);
  if (!certificates.ok()) return certificates.status();
  const X509* leaf = certificates->front().get();

  ERR_clear_error();
  BioPtr key_bio = MemoryBio(*key);
  if (key_bio == nullptr) return absl::ResourceExhaustedError("cannot allocate a BIO");
  KeyPtr private_key(PEM_read_bio_PrivateKey(key_bio.get(), nullptr, &RefusePassphrase, nullptr),
                     &EVP_PKEY_free);
  if (private_key == nullptr) {
    const std::string reason = TakeOpenSslReason();
    if (absl::StrContains(*key, "ENCRYPTED")) {
      return absl::InvalidArgumentError(absl::StrCat(
          Where("tls_key", paths.key), "an encrypted key; the server takes unencrypted keys only"));
    }
    return absl::InvalidArgumentError(
        absl::StrCat(Where("tls_key", paths.key), "no private key that parses (", reason, ")"));
  }
  // What a key written before its certificate looks like for a moment.
  if (X509_check_private_key(leaf, private_key.get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(absl::StrCat(
        Where("tls_key", paths.key), "does not match the certificate in --tls_cert=",
        paths.certificate));
  }

  if (!paths.client_ca.empty()) {
    absl::StatusOr<std::string> bundle = ReadTlsFile("client_ca", paths.client_ca);
    if (!bundle.ok()) return bundle.status();
    absl::StatusOr<std::vector<X509Ptr>> authorities =
        ParseCertificates("client_ca", paths.client_ca, *bundle);
    if (!authorities.ok()) return authorities.status();
    material.client_ca = *std::move(bundle);
  }

  absl::StatusOr<absl::Time> not_before = ToTime(X509_get0_notBefore(leaf));
  absl::StatusOr<absl::Time> not_after = ToTime(X509_get0_notAfter(leaf));
  if (!not_before.ok() || !not_after.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        Where("tls_cert", paths.certificate), "the certificate has an unreadable validity date"));
  }
  material.not_before = *not_before;
  material.not_after = *not_after;
  material.serial = SerialHex(leaf);
  material.certificate_chain = *std::move(chain);
  material.private_key = *std::move(key);
  return material;
}

}  // namespace weightpath::server
