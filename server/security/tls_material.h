// The server's TLS files read and checked the way a handshake would use
// them, before anything is handed to gRPC: gRPC 1.51 aborts the process on
// an empty certificate or key, and serves every handshake from a key that
// does not match its certificate, so nothing unchecked may reach it.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace weightpath::server {

// A TLS file is a few KB; a file far larger is not one.
inline constexpr size_t kMaxTlsFileBytes = 1024 * 1024;

struct TlsPaths {
  std::string certificate;  // --tls_cert: the chain, leaf first
  std::string key;          // --tls_key
  std::string client_ca;    // --client_ca; empty without mutual TLS
};

// One usable set of the files' contents, and what the logs and the expiry
// gauge say about it.
struct TlsMaterial {
  std::string certificate_chain;
  std::string private_key;
  std::string client_ca;  // empty without --client_ca
  std::string serial;     // the leaf's, upper-case hex
  absl::Time not_before;  // the leaf's
  absl::Time not_after;   // the leaf's

  bool SameFiles(const TlsMaterial& other) const {
    return certificate_chain == other.certificate_chain && private_key == other.private_key &&
           client_ca == other.client_ca;
  }
};

// Reads each file with the bounded reader (one non-blocking open, regular
// files only, at most kMaxTlsFileBytes) and checks that the chain's
// certificates and the CA bundle parse, that the key parses (an encrypted
// key is refused: nobody is there to type a passphrase) and that it is the
// leaf certificate's key. Errors name the flag and the file and say why:
// NOT_FOUND, PERMISSION_DENIED, INVALID_ARGUMENT (empty, not a regular
// file, too large, not PEM, key does not match), UNAVAILABLE (read error).
// A certificate outside its validity period is not an error here; the
// caller says so when it serves one.
absl::StatusOr<TlsMaterial> LoadTlsMaterial(const TlsPaths& paths);

}  // namespace weightpath::server
