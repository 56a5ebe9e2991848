#include "server/observability/certificate_expiry.h"

#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <ctime>
#include <memory>
#include <optional>

#include "server/config/file_fingerprint.h"

namespace weightpath::server {
namespace {

// A certificate bundle is a few KB; a file far larger is not one.
constexpr size_t kMaxCertificateFileBytes = 1024 * 1024;

}  // namespace

absl::StatusOr<absl::Time> EarliestCertificateExpiry(absl::string_view pem) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(
      BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), &BIO_free);
  if (bio == nullptr) return absl::ResourceExhaustedError("cannot allocate a BIO");
  std::optional<absl::Time> earliest;
  while (true) {
    std::unique_ptr<X509, decltype(&X509_free)> certificate(
        PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr), &X509_free);
    if (certificate == nullptr) break;
    std::tm expiry{};
    if (ASN1_TIME_to_tm(X509_get0_notAfter(certificate.get()), &expiry) != 1) {
      return absl::InvalidArgumentError("a certificate has an unreadable notAfter");
    }
    const absl::Time at = absl::FromTimeT(timegm(&expiry));
    if (!earliest.has_value() || at < *earliest) earliest = at;
  }
  if (!earliest.has_value()) return absl::InvalidArgumentError("no PEM certificate in the file");
  return *earliest;
}

CertificateExpiry::CertificateExpiry(std::vector<std::pair<std::string, std::string>> files) {
  for (auto& [label, path] : files) {
    if (!path.empty()) files_.emplace_back(std::move(label), std::move(path));
  }
}

std::vector<prometheus::MetricFamily> CertificateExpiry::Collect() const {
  if (files_.empty()) return {};
  prometheus::MetricFamily family;
  family.name = "weightpath_tls_certificate_expiry_timestamp_seconds";
  family.help =
      "When the earliest certificate in each TLS file the server uses expires (Unix seconds)";
  family.type = prometheus::MetricType::Gauge;
  for (const auto& [label, path] : files_) {
    absl::StatusOr<std::string> text = ReadWholeFile(path, kMaxCertificateFileBytes);
    if (!text.ok()) continue;
    absl::StatusOr<absl::Time> expiry = EarliestCertificateExpiry(*text);
    if (!expiry.ok()) continue;
    prometheus::ClientMetric sample;
    sample.label.push_back({"certificate", label});
    sample.gauge.value = absl::ToDoubleSeconds(*expiry - absl::UnixEpoch());
    family.metric.push_back(std::move(sample));
  }
  return {std::move(family)};
}

}  // namespace weightpath::server
