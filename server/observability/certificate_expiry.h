// weightpath_tls_certificate_expiry_timestamp_seconds: when the TLS files
// the server serves with run out, read at scrape time from the private
// copies gRPC serves (server/security/tls_reloader.h), so a renewal shows
// once it is served, and a refused one never does.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"

namespace weightpath::server {

// The earliest notAfter among the PEM certificates in `pem` (a chain or a
// CA bundle): the moment the file stops being usable. INVALID_ARGUMENT when
// it holds no certificate.
absl::StatusOr<absl::Time> EarliestCertificateExpiry(absl::string_view pem);

class CertificateExpiry final : public prometheus::Collectable {
 public:
  // (label value, path) pairs, e.g. {"server", --tls_cert}, {"client_ca",
  // --client_ca}; empty paths are left out. A file that cannot be read or
  // parsed at scrape time has no sample (absent() alerts on it).
  explicit CertificateExpiry(std::vector<std::pair<std::string, std::string>> files);

  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  std::vector<std::pair<std::string, std::string>> files_;
};

}  // namespace weightpath::server
